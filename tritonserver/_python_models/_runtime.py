"""One in-process python model instance: model.py imported, and its
``TritonPythonModel`` initialized, executed and finalized. Called by the
extension's backend (cpp/python_backend/python_backend.cc) on the core's threads with the
GIL held; these functions never raise for a model's own failure: a load
error comes back as a message, an execute error as error responses."""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import os
import sys
import threading
import traceback
from types import ModuleType
from typing import Any, Optional

from .. import _native
from .._api import _errors
from .._api._enums import DataType
from . import _bls, pb_utils
from ._awaiting import BackgroundLoop, OwnLoop
from ._model_imports import ModelImports

_log = logging.getLogger("tritonserver.models")
# The models' own log (pb_utils.Logger) and their failures, as the stub
# writes them to Triton's log (off by default): they reach the handlers the
# program configures, not Python's last resort on stderr when it has none.
_log.addHandler(logging.NullHandler())
_INTERNAL = pb_utils.TritonError.INTERNAL
_FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
_RESPONSE = pb_utils.InferenceResponse

# Model-config parameters that only the stub process can honour.
_STUB_ONLY_PARAMETERS = {
    "EXECUTION_ENV_PATH": "a model's own Python environment (a conda-pack archive) needs its own process",
}


class LoadError(Exception):
    """A model that cannot load in-process; the message is the core's."""

    def __init__(self, message: str, code: int = pb_utils.TritonError.INVALID_ARG) -> None:
        super().__init__(message)
        self.code = code


Failure = tuple[int, str]  # (TRITONSERVER_Error_Code, message) for the core


def load_instance(args: dict[str, str], server_address: int) -> tuple[Optional["Instance"], Optional[Failure]]:
    """(instance, None), or (None, (code, why the model cannot load)).
    `server_address`: the core server the model runs in (for BLS)."""
    try:
        return Instance(args, server_address), None
    except LoadError as e:
        return None, (e.code, str(e))
    except (Exception, SystemExit) as e:  # the model's own import or initialize(), worded as the stub does
        return None, (_INTERNAL, _describe(e))


def auto_complete(args: dict[str, str]) -> tuple[Optional[str], Optional[Failure]]:
    """(completed config JSON or None when the model has no
    auto_complete_config, None), or (None, why it failed): model.py's
    ``TritonPythonModel.auto_complete_config`` run on the config, as the
    stub does before the instances start."""
    name = args["model_name"]
    try:
        config = json.loads(args["model_config"])
        path, folder = _model_file(name, config, args)
        _bls.enter(None, folder, name)
        sys.modules["triton_python_backend_utils"] = pb_utils
        try:
            imports, module = _import_model(name, path, f"{name}_{args['model_version']}_auto_complete",
                                            folder, args["model_repository"])
        except LoadError:
            raise
        except (Exception, SystemExit) as e:  # model.py's import: its error alone, as the stub words it
            return None, (_INTERNAL, _describe(e))
        try:
            model_class = getattr(module, "TritonPythonModel", None)
            complete = getattr(model_class, "auto_complete_config", None)
            if complete is None:
                return None, None
            result = complete(pb_utils.ModelConfig(config))
            if not isinstance(result, pb_utils.ModelConfig):
                return None, (pb_utils.TritonError.INVALID_ARG,
                              f"model '{name}': auto_complete_config() must return the ModelConfig it was "
                              f"given, not {type(result).__name__}")
            return json.dumps(result.as_dict()), None
        finally:
            imports.close()
    except LoadError as e:
        return None, (e.code, str(e))
    except (Exception, SystemExit) as e:
        return None, (_INTERNAL, f"model '{name}': auto_complete_config(): {_describe(e)}")


def _model_file(name: str, config: dict[str, Any], args: dict[str, str]) -> tuple[str, str]:
    """(model.py's path, its folder) for a model's config and load args."""
    filename = config.get("default_model_filename") or "model.py"
    folder = os.path.join(args["model_repository"], args["model_version"])
    path = os.path.join(folder, filename)
    if not os.path.isfile(path):
        raise LoadError(f"model '{name}': no {filename} in {folder}")
    return path, folder


def _parameter(config: dict[str, Any], key: str, default: str) -> str:
    """The model config's string parameter `key`, stripped and lower-case."""
    value = config.get("parameters", {}).get(key, {}).get("string_value", default)
    return str(value).strip().lower()


# The package's own frames (the model API's, the runtime's): the stub's
# come from C++ and show none. (A bound function's package is its own.)
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def _describe(error: BaseException) -> str:
    """A model's exception as a response or load error message, as the stub
    words it: "Type: message", then where it was raised ("At:", innermost
    frame first, the runtime's own frames left out)."""
    if isinstance(error, pb_utils.TritonError):  # (on the stub not an exception: raising it is a TypeError there)
        text = str(error)
    else:
        text = f"{type(error).__name__}: {str(error) or '<EMPTY MESSAGE>'}"
    if isinstance(error, (ValueError, RuntimeError)) and "only works in main thread" in str(error):
        # signal.signal(), signal.set_wakeup_fd(), loop.add_signal_handler():
        # fine on the stub's main thread, never on the core's threads.
        text += ("\n\nThis python model runs in-process, on the Triton core's threads (model.py's import, "
                 "initialize() and execute() alike), and only the main thread may install signal handlers: "
                 "install the handler in the host program, or run the model with the stub: "
                 "Options(python_models=\"stub\")")
    frames = [f for f in traceback.extract_tb(error.__traceback__)
              if not f.filename.startswith((_PACKAGE_DIR, "<frozen "))]
    if not frames:
        return text
    return text + "\n\nAt:\n" + "".join(f"  {f.filename}({f.lineno}): {f.name}\n" for f in reversed(frames))


class Instance:
    """One instance of a python model run in this interpreter."""

    def __init__(self, args: dict[str, str], server_address: int) -> None:
        self.name = args["model_name"]
        self.instance_name = args["model_instance_name"]
        self.server_address = server_address
        config = json.loads(args["model_config"])
        for key, why in _STUB_ONLY_PARAMETERS.items():
            if key in config.get("parameters", {}):
                raise LoadError(
                    f"model '{self.name}': parameter {key} is not supported for python models run in-process "
                    f"({why}); run python models with the stub: Options(python_models=\"stub\"), in an "
                    "environment with numpy<2 and a Python the core has a stub for", pb_utils.TritonError.UNSUPPORTED)
        self.decoupled = pb_utils.using_decoupled_model_transaction_policy(config)
        # A batching model's batch statistics count the batch size (the
        # first dimension of each request's first input), as the stub's do.
        self.batching = int(config.get("max_batch_size", 0)) > 0
        # Inputs in GPU memory reach the model there only when the config
        # says so, as with the stub; by default they are copied to the host.
        self.device_inputs = _parameter(config, "FORCE_CPU_ONLY_INPUT_TENSORS", "yes") == "no"
        # Numeric inputs in host memory are private, writable copies, as the
        # stub gives them; ZERO_COPY_INPUTS "yes" makes them read-only views
        # of the request's memory (the client's array, no copy).
        self.zero_copy_inputs = _parameter(config, "ZERO_COPY_INPUTS", "no") == "yes"
        # The outputs' declared types (TRITONSERVER_DataType numbers): a
        # response returning another is said once per output
        # (warn_output_type).
        self.declared_outputs = _declared_types(config.get("output", []))
        # Whether the core's thread may hand batches to a worker thread
        # (cpp/python_backend/instance_worker.h): one instance and no batcher, so that the
        # core's scheduling does not depend on execute taking its time.
        instances = sum(int(group.get("count", 1)) for group in config.get("instance_group", [])) or 1
        self.hand_off = (instances == 1 and "dynamic_batching" not in config
                         and "sequence_batching" not in config)
        path, folder = _model_file(self.name, config, args)
        self.model_dir = folder  # pb_utils.get_model_dir()
        _bls.enter(server_address, folder, self.instance_name)
        # model.py imports triton_python_backend_utils: ours, in-process.
        sys.modules["triton_python_backend_utils"] = pb_utils
        self._imports, self.module = _import_model(
            self.name, path, f"{self.name}_{args['model_version']}_{args['model_instance_name']}", folder,
            args["model_repository"])
        self._loop = OwnLoop()
        self._background: Optional[BackgroundLoop] = None
        try:  # a model that fails to start leaves none of its modules behind
            model_class = getattr(self.module, "TritonPythonModel", None)
            if model_class is None:
                raise LoadError(f"model '{self.name}': {path} defines no class TritonPythonModel")
            self.model = model_class()
            if hasattr(self.model, "initialize"):
                result = self.model.initialize(args)
                if inspect.isawaitable(result):
                    self._run_to_end(result)
        except BaseException:
            self._imports.close()
            raise
        # None: the model has no execute(), which the stub says to each batch
        # (the model loads there).
        self._execute = getattr(self.model, "execute", None)
        self._model_file = path
        # The package's own bound-function models may take the native
        # requests directly (_bound.py); other models get each as a
        # pb_utils.InferenceRequest, which the backend makes (request_type).
        self._execute_natives = getattr(self.model, "_tritonserver_execute_natives", None)
        self.request_type = pb_utils.InferenceRequest if self._execute_natives is None else None

    def _run_to_end(self, awaitable: Any) -> Any:
        """The result of the model's coroutine (async initialize, execute or
        finalize), run to its end: a non-decoupled model's on an event loop
        of this instance run by the calling thread; a decoupled model's on
        its background loop, where its async execute() runs."""
        if self.decoupled:
            return self._background_loop().run_to_end(awaitable)
        return self._loop.run_to_end(awaitable)

    def _background_loop(self) -> BackgroundLoop:
        """The decoupled model's background loop, started at first use."""
        if self._background is None:
            context = self.server_address, self.model_dir, self.instance_name
            self._background = BackgroundLoop(f"tritonserver model {self.instance_name} asyncio",
                                              lambda: _bls.enter(*context))
        return self._background

    def _start_in_background(self, awaitable: Any, natives: list[_native.BackendRequest]) -> None:
        """Start a decoupled model's async execute() and return at once, as
        the stub does: the core hands the instance its next requests while
        these await. If it fails, the error is logged and each of its
        requests left without a final response gets it."""
        instance_name = self.instance_name

        def on_error(error: BaseException) -> None:
            if isinstance(error, asyncio.CancelledError):
                message = (f"model '{instance_name}' was unloaded while its async execute() still ran for this "
                           "request")
                code = pb_utils.TritonError.UNAVAILABLE
            else:
                message = (f"Failed to process the request(s) for model '{instance_name}', message: "
                           f"{_describe(error)}")
                code = error.code() if isinstance(error, pb_utils.TritonError) else _INTERNAL
                _log.error("%s", message)
            for native in natives:
                native.fail_if_unanswered(code, message)

        self._background_loop().start(awaitable, on_error)

    def start_worker(self, run: Any) -> None:
        """Start the instance's worker thread, whose body is `run` (native:
        it returns when the instance is finalized). A Python thread, so that
        Python makes its thread state with the GIL held."""
        threading.Thread(target=run, name=f"tritonserver model {self.instance_name}", daemon=True).start()

    def execute(self, natives: list[_native.BackendRequest],
                requests: Optional[list[pb_utils.InferenceRequest]]) -> None:
        """Run the model on a batch of requests (`requests`: the natives as
        pb_utils requests; None for a model that takes the natives) and
        send their responses; a request left unanswered gets an error
        response naming why."""
        _bls.enter(self.server_address, self.model_dir, self.instance_name)
        if requests is None:
            assert self._execute_natives is not None
            try:
                self._execute_natives(natives)
            except Exception as e:  # failed as if execute() raised it
                code = e.code() if isinstance(e, pb_utils.TritonError) else _INTERNAL
                self._fail_batch(natives, _describe(e), code)
            return
        if self._execute is None:
            self._fail_batch(natives, f"Python model {self._model_file} does not implement `execute` method.")
            return
        try:
            result = self._execute(requests)
            if not isinstance(result, list) and inspect.isawaitable(result):
                if self.decoupled:
                    self._start_in_background(result, natives)
                    return
                result = self._run_to_end(result)
        except Exception as e:
            code = e.code() if isinstance(e, pb_utils.TritonError) else _INTERNAL
            self._fail_batch(natives, _describe(e), code)
            return
        if result is None:
            # Accepted, as the stub accepts it: the model may answer later
            # through the request's sender. A request the model lets go of
            # unanswered would wait forever there: here it gets an error.
            if not self.decoupled:
                for native in natives:
                    native.answer_when_dropped(_UNANSWERED.format(self.name, "returned None"))
            return
        wrong = _wrong_return(result, self.decoupled, self.instance_name, len(natives))
        if wrong is not None:
            self._fail_batch(natives, wrong)
            return
        # One native call checks the batch, then sends: a response for a
        # rescheduled request is the stub's error (and words) for the whole
        # batch, none of them rescheduled then; so is a response returned for
        # a request its sender answered already (as the stub's execute
        # fails), never a response dropped or sent twice. Plain
        # InferenceResponse objects are sent natively; the rest (errors,
        # other types, sends that fail) here, as they were.
        left, rescheduled, twice = _native.send_final_responses(natives, result)
        if rescheduled is not None:
            self._fail_batch(natives, "Expected a None object in the execute function return list for "
                             f"reschduled request, found type '{type(result[rescheduled])}'.")
            return
        if twice:
            self._fail_batch(natives, "Unable to send response. Non-decoupled model cannot send more than one "
                             f"response. (model '{self.name}': execute() returned a response for request(s) {twice} "
                             "of the batch, which had one sent through the response sender; a non-decoupled model "
                             "gives each request one response: put None in the returned list for a request "
                             "answered through its sender)")
            return
        for index in left:
            native, response = natives[index], result[index]
            if response is None:  # answered later, or an error once let go of
                native.answer_when_dropped(_UNANSWERED.format(self.name, "returned None in its list for this "
                                                              "request"))
                continue
            try:
                pb_utils._send(native, response, _FINAL)
            except _errors.TritonError as e:  # the native send's own, naming the model
                native.fail_if_unanswered(_bls._error_of(e).code(), str(e))
            except Exception as e:
                native.fail_if_unanswered(_INTERNAL, f"model '{self.name}': {_describe(e)}")

    def _fail_batch(self, natives: list[_native.BackendRequest], why: str, code: int = _INTERNAL) -> None:
        """execute() failed for the whole batch, as the stub fails it: its
        error (worded as the stub's) logged and sent to each request not
        answered already; their senders send no more."""
        message = f"Failed to process the request(s) for model '{self.instance_name}', message: {why}"
        _log.error("%s", message)
        for native in natives:
            native.fail_if_unanswered(code, message)

    def finalize(self) -> None:
        """Call the model's finalize() (its exception is logged)."""
        _bls.enter(self.server_address, self.model_dir, self.instance_name)
        try:
            if hasattr(self.model, "finalize"):
                result = self.model.finalize()
                if inspect.isawaitable(result):
                    self._run_to_end(result)
        except Exception:
            _log.exception("model '%s': finalize() failed", self.name)
        finally:
            self._imports.close()
            self._loop.close()
            if self._background is not None:
                self._background.close()
                self._background = None


_UNANSWERED = ("model '{}': execute() {}, and this request got no final response through its response "
               "sender before the model let go of both (the python backend's stub leaves such a request "
               "unanswered): return a list of one InferenceResponse per request, or send each request's response "
               "with the flag TRITONSERVER_RESPONSE_COMPLETE_FINAL")


def _wrong_return(result: Any, decoupled: bool, instance: str, requests: int) -> Optional[str]:
    """Why what execute() returned (not None) is refused, in the stub's
    words (its ProcessReturnedResponses), or None: a decoupled model
    returns None; a list of one InferenceResponse (or None) per request."""
    if decoupled:
        return f"Python model '{instance}' is using the decoupled mode and the execute function must return None."
    if not isinstance(result, list):
        return f"Expected a list in the execute return, found type '{type(result)}'."
    if len(result) != requests:
        return ("Number of InferenceResponse objects do not match the number of InferenceRequest objects. "
                f"InferenceRequest(s) size is:{requests}, and InferenceResponse(s) size is:{len(result)}\n")
    for response in result:
        if response is not None and type(response) is not _RESPONSE and not isinstance(response, _RESPONSE):
            return ("Expected an 'InferenceResponse' object in the execute function return list, found type "
                    f"'{type(response)}'.")
    return None


# The config's data type names: TRITONSERVER_DataType numbers.
_CONFIG_TYPES = {"TYPE_" + ("STRING" if t == DataType.BYTES else t.name): int(t) for t in DataType
                 if t != DataType.INVALID}


def _declared_types(outputs: list[dict[str, Any]]) -> dict[str, int]:
    """{name: TRITONSERVER_DataType number} of the config's `outputs`."""
    declared = {}
    for output in outputs:
        number = _CONFIG_TYPES.get(output.get("data_type", ""))
        if number is not None:
            declared[output["name"]] = number
    return declared


def warn_output_type(model: str, output: str, declared: int, returned: int) -> None:
    """Says (once per output: the backend asks once) that `model` returned
    `output` as another type than its config declares."""
    declared_name, returned_name = DataType(declared).name, DataType(returned).name
    _log.warning("model '%s': output '%s' is declared TYPE_%s in its config, but execute() returned %s: clients get "
                 "%s while the model's metadata says %s; return %s (e.g. array.astype(...)) or declare TYPE_%s "
                 "(said once per output)", model, output, declared_name.replace("BYTES", "STRING"), returned_name,
                 returned_name, declared_name, declared_name, returned_name.replace("BYTES", "STRING"))


def _import_model(model: str, path: str, key: str, folder: str, model_folder: str) -> tuple[ModelImports, ModuleType]:
    """(its imports, the module): model.py imported in a private package of
    its own (one per instance, as each stub process had its own), whose
    helpers are found in its version `folder`, then in `model_folder`, as
    with the stub (_model_imports.py); the caller closes the imports."""
    imports = ModelImports(key, [folder, model_folder])
    try:
        module = imports.import_model(path)
    except BaseException:
        imports.close()
        raise
    if module is None:
        imports.close()
        raise LoadError(f"model '{model}': cannot import {path}")
    return imports, module
