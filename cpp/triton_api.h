// Our own declarations of the subset of the Triton in-process C API
// (tritonserver.h, API 1.x) that this package calls. No Triton header is
// needed at build time: every function is resolved at run time with dlsym
// into the table below (see triton_library.cc).
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" {

struct TRITONSERVER_Error;
struct TRITONSERVER_InferenceRequest;
struct TRITONSERVER_InferenceResponse;
struct TRITONSERVER_InferenceTrace;
struct TRITONSERVER_Message;
struct TRITONSERVER_Metrics;
struct TRITONSERVER_Parameter;
struct TRITONSERVER_ResponseAllocator;
struct TRITONSERVER_Server;
struct TRITONSERVER_ServerOptions;
struct TRITONSERVER_Metric;
struct TRITONSERVER_MetricFamily;
// The backend API (tritonbackend.h), for the in-process python backend.
struct TRITONBACKEND_Backend;
struct TRITONBACKEND_Model;
struct TRITONBACKEND_ModelInstance;
struct TRITONBACKEND_Request;
struct TRITONBACKEND_Response;
struct TRITONBACKEND_ResponseFactory;
struct TRITONBACKEND_Input;
struct TRITONBACKEND_Output;
enum TRITONBACKEND_ArtifactType : int {};

enum TRITONSERVER_DataType : int {
  TRITONSERVER_TYPE_INVALID = 0,
  TRITONSERVER_TYPE_BOOL = 1,
  TRITONSERVER_TYPE_UINT8 = 2,
  TRITONSERVER_TYPE_UINT16 = 3,
  TRITONSERVER_TYPE_UINT32 = 4,
  TRITONSERVER_TYPE_UINT64 = 5,
  TRITONSERVER_TYPE_INT8 = 6,
  TRITONSERVER_TYPE_INT16 = 7,
  TRITONSERVER_TYPE_INT32 = 8,
  TRITONSERVER_TYPE_INT64 = 9,
  TRITONSERVER_TYPE_FP16 = 10,
  TRITONSERVER_TYPE_FP32 = 11,
  TRITONSERVER_TYPE_FP64 = 12,
  TRITONSERVER_TYPE_BYTES = 13,
  TRITONSERVER_TYPE_BF16 = 14,
};

enum TRITONSERVER_MemoryType : int {
  TRITONSERVER_MEMORY_CPU = 0,
  TRITONSERVER_MEMORY_CPU_PINNED = 1,
  TRITONSERVER_MEMORY_GPU = 2,
};

enum TRITONSERVER_ParameterType : int {
  TRITONSERVER_PARAMETER_STRING = 0,
  TRITONSERVER_PARAMETER_INT = 1,
  TRITONSERVER_PARAMETER_BOOL = 2,
  TRITONSERVER_PARAMETER_DOUBLE = 3,
  TRITONSERVER_PARAMETER_BYTES = 4,
};

// Used by the test backend (tests/backends/identity) only.
enum TRITONSERVER_LogLevel : int {
  TRITONSERVER_LOG_INFO = 0,
  TRITONSERVER_LOG_WARN = 1,
  TRITONSERVER_LOG_ERROR = 2,
  TRITONSERVER_LOG_VERBOSE = 3,
};
constexpr uint32_t TRITONSERVER_REQUEST_RELEASE_ALL = 1;
constexpr uint32_t TRITONSERVER_REQUEST_RELEASE_RESCHEDULE = 2;

// Types whose values only pass through from Python (tritonserver._api._enums
// declares them).
enum TRITONSERVER_InstanceGroupKind : int {};
enum TRITONSERVER_LogFormat : int {};
enum TRITONSERVER_MetricFormat : int {};
enum TRITONSERVER_MetricKind : int {};
enum TRITONSERVER_ModelControlMode : int {};
enum TRITONSERVER_RateLimitMode : int {};

enum TRITONSERVER_Error_Code : int {
  TRITONSERVER_ERROR_UNKNOWN = 0,
  TRITONSERVER_ERROR_INTERNAL = 1,
  TRITONSERVER_ERROR_NOT_FOUND = 2,
  TRITONSERVER_ERROR_INVALID_ARG = 3,
  TRITONSERVER_ERROR_UNAVAILABLE = 4,
  TRITONSERVER_ERROR_UNSUPPORTED = 5,
  TRITONSERVER_ERROR_ALREADY_EXISTS = 6,
  TRITONSERVER_ERROR_CANCELLED = 7,
};

constexpr uint32_t TRITONSERVER_RESPONSE_COMPLETE_FINAL = 1;

typedef TRITONSERVER_Error* (*TRITONSERVER_ResponseAllocatorAllocFn_t)(
    TRITONSERVER_ResponseAllocator* allocator, const char* tensor_name,
    size_t byte_size, TRITONSERVER_MemoryType memory_type,
    int64_t memory_type_id, void* userp, void** buffer, void** buffer_userp,
    TRITONSERVER_MemoryType* actual_memory_type,
    int64_t* actual_memory_type_id);
typedef TRITONSERVER_Error* (*TRITONSERVER_ResponseAllocatorReleaseFn_t)(
    TRITONSERVER_ResponseAllocator* allocator, void* buffer,
    void* buffer_userp, size_t byte_size, TRITONSERVER_MemoryType memory_type,
    int64_t memory_type_id);
typedef TRITONSERVER_Error* (*TRITONSERVER_ResponseAllocatorStartFn_t)(
    TRITONSERVER_ResponseAllocator* allocator, void* userp);
typedef TRITONSERVER_Error* (*TRITONSERVER_ResponseAllocatorQueryFn_t)(
    TRITONSERVER_ResponseAllocator* allocator, void* userp,
    const char* tensor_name, size_t* byte_size,
    TRITONSERVER_MemoryType* memory_type, int64_t* memory_type_id);
typedef void (*TRITONSERVER_InferenceRequestReleaseFn_t)(
    TRITONSERVER_InferenceRequest* request, const uint32_t flags, void* userp);
typedef void (*TRITONSERVER_InferenceResponseCompleteFn_t)(
    TRITONSERVER_InferenceResponse* response, const uint32_t flags,
    void* userp);
// Newer cores only (ServerOptionsSetLogCallback): the declaration follows
// the callback shape (level, file, line, message, user pointer).
typedef void (*TRITONSERVER_LogMessageFn_t)(
    TRITONSERVER_LogLevel level, const char* filename, const int line,
    const char* msg, void* userp);

}  // extern "C"

// X-macro list of the functions we call: X(short name, return, (args)).
// Each is looked up as "TRITONSERVER_" #name.
#define TRITON_REQUIRED_FUNCTIONS(X)                                          \
  X(ApiVersion, TRITONSERVER_Error*, (uint32_t*, uint32_t*))                  \
  X(ErrorNew, TRITONSERVER_Error*, (TRITONSERVER_Error_Code, const char*))    \
  X(ErrorDelete, void, (TRITONSERVER_Error*))                                 \
  X(ErrorCode, TRITONSERVER_Error_Code, (TRITONSERVER_Error*))                \
  X(ErrorMessage, const char*, (TRITONSERVER_Error*))                         \
  X(ParameterNew, TRITONSERVER_Parameter*,                                    \
    (const char*, TRITONSERVER_ParameterType, const void*))                   \
  X(ParameterBytesNew, TRITONSERVER_Parameter*,                               \
    (const char*, const void*, uint64_t))                                     \
  X(ParameterDelete, void, (TRITONSERVER_Parameter*))                         \
  X(ResponseAllocatorNew, TRITONSERVER_Error*,                                \
    (TRITONSERVER_ResponseAllocator**,                                        \
     TRITONSERVER_ResponseAllocatorAllocFn_t,                                 \
     TRITONSERVER_ResponseAllocatorReleaseFn_t,                               \
     TRITONSERVER_ResponseAllocatorStartFn_t))                                \
  X(ResponseAllocatorSetQueryFunction, TRITONSERVER_Error*,                   \
    (TRITONSERVER_ResponseAllocator*,                                         \
     TRITONSERVER_ResponseAllocatorQueryFn_t))                                \
  X(MessageSerializeToJson, TRITONSERVER_Error*,                              \
    (TRITONSERVER_Message*, const char**, size_t*))                           \
  X(MessageDelete, TRITONSERVER_Error*, (TRITONSERVER_Message*))              \
  X(MetricsFormatted, TRITONSERVER_Error*,                                    \
    (TRITONSERVER_Metrics*, TRITONSERVER_MetricFormat, const char**,          \
     size_t*))                                                                \
  X(MetricsDelete, TRITONSERVER_Error*, (TRITONSERVER_Metrics*))              \
  X(InferenceRequestNew, TRITONSERVER_Error*,                                 \
    (TRITONSERVER_InferenceRequest**, TRITONSERVER_Server*, const char*,      \
     int64_t))                                                                \
  X(InferenceRequestDelete, TRITONSERVER_Error*,                              \
    (TRITONSERVER_InferenceRequest*))                                         \
  X(InferenceRequestSetId, TRITONSERVER_Error*,                               \
    (TRITONSERVER_InferenceRequest*, const char*))                            \
  X(InferenceRequestSetFlags, TRITONSERVER_Error*,                            \
    (TRITONSERVER_InferenceRequest*, uint32_t))                               \
  X(InferenceRequestSetCorrelationId, TRITONSERVER_Error*,                    \
    (TRITONSERVER_InferenceRequest*, uint64_t))                               \
  X(InferenceRequestSetCorrelationIdString, TRITONSERVER_Error*,              \
    (TRITONSERVER_InferenceRequest*, const char*))                            \
  X(InferenceRequestSetPriorityUInt64, TRITONSERVER_Error*,                   \
    (TRITONSERVER_InferenceRequest*, uint64_t))                               \
  X(InferenceRequestSetTimeoutMicroseconds, TRITONSERVER_Error*,              \
    (TRITONSERVER_InferenceRequest*, uint64_t))                               \
  X(InferenceRequestAddInput, TRITONSERVER_Error*,                            \
    (TRITONSERVER_InferenceRequest*, const char*, TRITONSERVER_DataType,      \
     const int64_t*, uint64_t))                                               \
  X(InferenceRequestAddRawInput, TRITONSERVER_Error*,                         \
    (TRITONSERVER_InferenceRequest*, const char*))                            \
  X(InferenceRequestAppendInputData, TRITONSERVER_Error*,                     \
    (TRITONSERVER_InferenceRequest*, const char*, const void*, size_t,        \
     TRITONSERVER_MemoryType, int64_t))                                       \
  X(InferenceRequestAddRequestedOutput, TRITONSERVER_Error*,                  \
    (TRITONSERVER_InferenceRequest*, const char*))                            \
  X(InferenceRequestSetReleaseCallback, TRITONSERVER_Error*,                  \
    (TRITONSERVER_InferenceRequest*,                                          \
     TRITONSERVER_InferenceRequestReleaseFn_t, void*))                        \
  X(InferenceRequestSetResponseCallback, TRITONSERVER_Error*,                 \
    (TRITONSERVER_InferenceRequest*, TRITONSERVER_ResponseAllocator*, void*,  \
     TRITONSERVER_InferenceResponseCompleteFn_t, void*))                      \
  X(InferenceRequestSetStringParameter, TRITONSERVER_Error*,                  \
    (TRITONSERVER_InferenceRequest*, const char*, const char*))               \
  X(InferenceRequestSetIntParameter, TRITONSERVER_Error*,                     \
    (TRITONSERVER_InferenceRequest*, const char*, int64_t))                   \
  X(InferenceRequestSetBoolParameter, TRITONSERVER_Error*,                    \
    (TRITONSERVER_InferenceRequest*, const char*, bool))                      \
  X(InferenceRequestCancel, TRITONSERVER_Error*,                              \
    (TRITONSERVER_InferenceRequest*))                                         \
  X(InferenceResponseDelete, TRITONSERVER_Error*,                             \
    (TRITONSERVER_InferenceResponse*))                                        \
  X(InferenceResponseError, TRITONSERVER_Error*,                              \
    (TRITONSERVER_InferenceResponse*))                                        \
  X(InferenceResponseId, TRITONSERVER_Error*,                                 \
    (TRITONSERVER_InferenceResponse*, const char**))                          \
  X(InferenceResponseModel, TRITONSERVER_Error*,                              \
    (TRITONSERVER_InferenceResponse*, const char**, int64_t*))                \
  X(InferenceResponseParameterCount, TRITONSERVER_Error*,                     \
    (TRITONSERVER_InferenceResponse*, uint32_t*))                             \
  X(InferenceResponseParameter, TRITONSERVER_Error*,                          \
    (TRITONSERVER_InferenceResponse*, uint32_t, const char**,                 \
     TRITONSERVER_ParameterType*, const void**))                              \
  X(InferenceResponseOutputCount, TRITONSERVER_Error*,                        \
    (TRITONSERVER_InferenceResponse*, uint32_t*))                             \
  X(InferenceResponseOutput, TRITONSERVER_Error*,                             \
    (TRITONSERVER_InferenceResponse*, uint32_t, const char**,                 \
     TRITONSERVER_DataType*, const int64_t**, uint64_t*, const void**,        \
     size_t*, TRITONSERVER_MemoryType*, int64_t*, void**))                    \
  X(ServerOptionsNew, TRITONSERVER_Error*, (TRITONSERVER_ServerOptions**))    \
  X(ServerOptionsDelete, TRITONSERVER_Error*, (TRITONSERVER_ServerOptions*))  \
  X(ServerOptionsSetServerId, TRITONSERVER_Error*,                            \
    (TRITONSERVER_ServerOptions*, const char*))                               \
  X(ServerOptionsSetModelRepositoryPath, TRITONSERVER_Error*,                 \
    (TRITONSERVER_ServerOptions*, const char*))                               \
  X(ServerOptionsSetModelControlMode, TRITONSERVER_Error*,                    \
    (TRITONSERVER_ServerOptions*, TRITONSERVER_ModelControlMode))             \
  X(ServerOptionsSetStartupModel, TRITONSERVER_Error*,                        \
    (TRITONSERVER_ServerOptions*, const char*))                               \
  X(ServerOptionsSetStrictModelConfig, TRITONSERVER_Error*,                   \
    (TRITONSERVER_ServerOptions*, bool))                                      \
  X(ServerOptionsSetRateLimiterMode, TRITONSERVER_Error*,                     \
    (TRITONSERVER_ServerOptions*, TRITONSERVER_RateLimitMode))                \
  X(ServerOptionsAddRateLimiterResource, TRITONSERVER_Error*,                 \
    (TRITONSERVER_ServerOptions*, const char*, size_t, int))                  \
  X(ServerOptionsSetPinnedMemoryPoolByteSize, TRITONSERVER_Error*,            \
    (TRITONSERVER_ServerOptions*, uint64_t))                                  \
  X(ServerOptionsSetCudaMemoryPoolByteSize, TRITONSERVER_Error*,              \
    (TRITONSERVER_ServerOptions*, int, uint64_t))                             \
  X(ServerOptionsSetCacheConfig, TRITONSERVER_Error*,                         \
    (TRITONSERVER_ServerOptions*, const char*, const char*))                  \
  X(ServerOptionsSetCacheDirectory, TRITONSERVER_Error*,                      \
    (TRITONSERVER_ServerOptions*, const char*))                               \
  X(ServerOptionsSetMinSupportedComputeCapability, TRITONSERVER_Error*,       \
    (TRITONSERVER_ServerOptions*, double))                                    \
  X(ServerOptionsSetExitOnError, TRITONSERVER_Error*,                         \
    (TRITONSERVER_ServerOptions*, bool))                                      \
  X(ServerOptionsSetStrictReadiness, TRITONSERVER_Error*,                     \
    (TRITONSERVER_ServerOptions*, bool))                                      \
  X(ServerOptionsSetExitTimeout, TRITONSERVER_Error*,                         \
    (TRITONSERVER_ServerOptions*, unsigned int))                              \
  X(ServerOptionsSetBufferManagerThreadCount, TRITONSERVER_Error*,            \
    (TRITONSERVER_ServerOptions*, unsigned int))                              \
  X(ServerOptionsSetModelLoadThreadCount, TRITONSERVER_Error*,                \
    (TRITONSERVER_ServerOptions*, unsigned int))                              \
  X(ServerOptionsSetModelNamespacing, TRITONSERVER_Error*,                    \
    (TRITONSERVER_ServerOptions*, bool))                                      \
  X(ServerOptionsSetLogFile, TRITONSERVER_Error*,                             \
    (TRITONSERVER_ServerOptions*, const char*))                               \
  X(ServerOptionsSetLogInfo, TRITONSERVER_Error*,                             \
    (TRITONSERVER_ServerOptions*, bool))                                      \
  X(ServerOptionsSetLogWarn, TRITONSERVER_Error*,                             \
    (TRITONSERVER_ServerOptions*, bool))                                      \
  X(ServerOptionsSetLogError, TRITONSERVER_Error*,                            \
    (TRITONSERVER_ServerOptions*, bool))                                      \
  X(ServerOptionsSetLogFormat, TRITONSERVER_Error*,                           \
    (TRITONSERVER_ServerOptions*, TRITONSERVER_LogFormat))                    \
  X(ServerOptionsSetLogVerbose, TRITONSERVER_Error*,                          \
    (TRITONSERVER_ServerOptions*, int))                                       \
  X(ServerOptionsSetMetrics, TRITONSERVER_Error*,                             \
    (TRITONSERVER_ServerOptions*, bool))                                      \
  X(ServerOptionsSetGpuMetrics, TRITONSERVER_Error*,                          \
    (TRITONSERVER_ServerOptions*, bool))                                      \
  X(ServerOptionsSetCpuMetrics, TRITONSERVER_Error*,                          \
    (TRITONSERVER_ServerOptions*, bool))                                      \
  X(ServerOptionsSetMetricsInterval, TRITONSERVER_Error*,                     \
    (TRITONSERVER_ServerOptions*, uint64_t))                                  \
  X(ServerOptionsSetBackendDirectory, TRITONSERVER_Error*,                    \
    (TRITONSERVER_ServerOptions*, const char*))                               \
  X(ServerOptionsSetRepoAgentDirectory, TRITONSERVER_Error*,                  \
    (TRITONSERVER_ServerOptions*, const char*))                               \
  X(ServerOptionsSetModelLoadDeviceLimit, TRITONSERVER_Error*,                \
    (TRITONSERVER_ServerOptions*, TRITONSERVER_InstanceGroupKind, int,        \
     double))                                                                 \
  X(ServerOptionsSetBackendConfig, TRITONSERVER_Error*,                       \
    (TRITONSERVER_ServerOptions*, const char*, const char*, const char*))     \
  X(ServerOptionsSetHostPolicy, TRITONSERVER_Error*,                          \
    (TRITONSERVER_ServerOptions*, const char*, const char*, const char*))     \
  X(ServerOptionsSetMetricsConfig, TRITONSERVER_Error*,                       \
    (TRITONSERVER_ServerOptions*, const char*, const char*, const char*))     \
  X(ServerNew, TRITONSERVER_Error*,                                           \
    (TRITONSERVER_Server**, TRITONSERVER_ServerOptions*))                     \
  X(ServerDelete, TRITONSERVER_Error*, (TRITONSERVER_Server*))                \
  X(ServerStop, TRITONSERVER_Error*, (TRITONSERVER_Server*))                  \
  X(ServerRegisterModelRepository, TRITONSERVER_Error*,                       \
    (TRITONSERVER_Server*, const char*, const TRITONSERVER_Parameter**,       \
     uint32_t))                                                               \
  X(ServerUnregisterModelRepository, TRITONSERVER_Error*,                     \
    (TRITONSERVER_Server*, const char*))                                      \
  X(ServerPollModelRepository, TRITONSERVER_Error*, (TRITONSERVER_Server*))   \
  X(ServerIsLive, TRITONSERVER_Error*, (TRITONSERVER_Server*, bool*))         \
  X(ServerIsReady, TRITONSERVER_Error*, (TRITONSERVER_Server*, bool*))        \
  X(ServerModelIsReady, TRITONSERVER_Error*,                                  \
    (TRITONSERVER_Server*, const char*, int64_t, bool*))                      \
  X(ServerModelBatchProperties, TRITONSERVER_Error*,                          \
    (TRITONSERVER_Server*, const char*, int64_t, uint32_t*, void**))          \
  X(ServerModelTransactionProperties, TRITONSERVER_Error*,                    \
    (TRITONSERVER_Server*, const char*, int64_t, uint32_t*, void**))          \
  X(ServerMetadata, TRITONSERVER_Error*,                                      \
    (TRITONSERVER_Server*, TRITONSERVER_Message**))                           \
  X(ServerModelMetadata, TRITONSERVER_Error*,                                 \
    (TRITONSERVER_Server*, const char*, int64_t, TRITONSERVER_Message**))     \
  X(ServerModelStatistics, TRITONSERVER_Error*,                               \
    (TRITONSERVER_Server*, const char*, int64_t, TRITONSERVER_Message**))     \
  X(ServerModelConfig, TRITONSERVER_Error*,                                   \
    (TRITONSERVER_Server*, const char*, int64_t, uint32_t,                    \
     TRITONSERVER_Message**))                                                 \
  X(ServerModelIndex, TRITONSERVER_Error*,                                    \
    (TRITONSERVER_Server*, uint32_t, TRITONSERVER_Message**))                 \
  X(ServerLoadModelWithParameters, TRITONSERVER_Error*,                       \
    (TRITONSERVER_Server*, const char*, const TRITONSERVER_Parameter**,       \
     uint64_t))                                                               \
  X(ServerUnloadModel, TRITONSERVER_Error*,                                   \
    (TRITONSERVER_Server*, const char*))                                      \
  X(ServerUnloadModelAndDependents, TRITONSERVER_Error*,                      \
    (TRITONSERVER_Server*, const char*))                                      \
  X(ServerMetrics, TRITONSERVER_Error*,                                       \
    (TRITONSERVER_Server*, TRITONSERVER_Metrics**))                           \
  X(ServerInferAsync, TRITONSERVER_Error*,                                    \
    (TRITONSERVER_Server*, TRITONSERVER_InferenceRequest*,                    \
     TRITONSERVER_InferenceTrace*))                                           \
  X(MetricFamilyNew, TRITONSERVER_Error*,                                     \
    (TRITONSERVER_MetricFamily**, TRITONSERVER_MetricKind, const char*,       \
     const char*))                                                            \
  X(MetricFamilyDelete, TRITONSERVER_Error*, (TRITONSERVER_MetricFamily*))    \
  X(MetricNew, TRITONSERVER_Error*,                                           \
    (TRITONSERVER_Metric**, TRITONSERVER_MetricFamily*,                       \
     const TRITONSERVER_Parameter**, uint64_t))                               \
  X(MetricDelete, TRITONSERVER_Error*, (TRITONSERVER_Metric*))                \
  X(MetricValue, TRITONSERVER_Error*, (TRITONSERVER_Metric*, double*))        \
  X(MetricIncrement, TRITONSERVER_Error*, (TRITONSERVER_Metric*, double))     \
  X(MetricSet, TRITONSERVER_Error*, (TRITONSERVER_Metric*, double))

// Functions that only one option, parameter type or feature needs, each
// with that feature's name: X(short name, return, (args), feature). A core
// without one still loads; the table holds null and using the feature raises
// UNSUPPORTED naming it (TRITON_NEED in triton_library.h). Which cores have
// which: docs/cores.md.
#define TRITON_OPTIONAL_FUNCTIONS(X)                                          \
  X(InferenceRequestSetDoubleParameter, TRITONSERVER_Error*,                  \
    (TRITONSERVER_InferenceRequest*, const char*, double),                    \
    "float request parameters (InferenceRequest.parameters)")                 \
  X(ServerOptionsSetModelLoadRetryCount, TRITONSERVER_Error*,                 \
    (TRITONSERVER_ServerOptions*, unsigned int),                              \
    "Options.model_load_retry_count other than 0")                            \
  X(ServerOptionsSetEnablePeerAccess, TRITONSERVER_Error*,                    \
    (TRITONSERVER_ServerOptions*, bool), "Options.enable_peer_access=False")  \
  X(ServerOptionsSetLogCallback, TRITONSERVER_Error*,                         \
    (TRITONSERVER_ServerOptions*, TRITONSERVER_LogMessageFn_t, void*),        \
    "Options.log_callback")                                                   \
  X(MessageNewFromSerializedJson, TRITONSERVER_Error*,                        \
    (TRITONSERVER_Message**, const char*, size_t),                            \
    "auto_complete_config of python models run in-process")

// The backend API functions (each looked up as "TRITONBACKEND_" #name, and
// held in the table as TRITONBACKEND_<name>) that the in-process python
// backend calls: X(short name, return, (args)). All are optional: a core
// without one still loads, and python models in-process are refused at load
// naming what is missing (python_backend/python_backend.cc).
#define TRITON_BACKEND_FUNCTIONS(X)                                           \
  X(ModelName, TRITONSERVER_Error*, (TRITONBACKEND_Model*, const char**))     \
  X(ModelVersion, TRITONSERVER_Error*, (TRITONBACKEND_Model*, uint64_t*))     \
  X(ModelConfig, TRITONSERVER_Error*,                                         \
    (TRITONBACKEND_Model*, uint32_t, TRITONSERVER_Message**))                 \
  X(ModelAutoCompleteConfig, TRITONSERVER_Error*,                             \
    (TRITONBACKEND_Model*, bool*))                                            \
  X(ModelSetConfig, TRITONSERVER_Error*,                                      \
    (TRITONBACKEND_Model*, uint32_t, TRITONSERVER_Message*))                  \
  X(ModelServer, TRITONSERVER_Error*,                                         \
    (TRITONBACKEND_Model*, TRITONSERVER_Server**))                            \
  X(ModelRepository, TRITONSERVER_Error*,                                     \
    (TRITONBACKEND_Model*, TRITONBACKEND_ArtifactType*, const char**))        \
  X(ModelInstanceName, TRITONSERVER_Error*,                                   \
    (TRITONBACKEND_ModelInstance*, const char**))                             \
  X(ModelInstanceKind, TRITONSERVER_Error*,                                   \
    (TRITONBACKEND_ModelInstance*, TRITONSERVER_InstanceGroupKind*))          \
  X(ModelInstanceDeviceId, TRITONSERVER_Error*,                               \
    (TRITONBACKEND_ModelInstance*, int32_t*))                                 \
  X(ModelInstanceModel, TRITONSERVER_Error*,                                  \
    (TRITONBACKEND_ModelInstance*, TRITONBACKEND_Model**))                    \
  X(ModelInstanceState, TRITONSERVER_Error*,                                  \
    (TRITONBACKEND_ModelInstance*, void**))                                   \
  X(ModelInstanceSetState, TRITONSERVER_Error*,                               \
    (TRITONBACKEND_ModelInstance*, void*))                                    \
  X(ModelInstanceReportStatistics, TRITONSERVER_Error*,                       \
    (TRITONBACKEND_ModelInstance*, TRITONBACKEND_Request*, bool, uint64_t,    \
     uint64_t, uint64_t, uint64_t))                                           \
  X(ModelInstanceReportBatchStatistics, TRITONSERVER_Error*,                  \
    (TRITONBACKEND_ModelInstance*, uint64_t, uint64_t, uint64_t, uint64_t,    \
     uint64_t))                                                               \
  X(RequestId, TRITONSERVER_Error*, (TRITONBACKEND_Request*, const char**))   \
  X(RequestCorrelationId, TRITONSERVER_Error*,                                \
    (TRITONBACKEND_Request*, uint64_t*))                                      \
  X(RequestCorrelationIdString, TRITONSERVER_Error*,                          \
    (TRITONBACKEND_Request*, const char**))                                   \
  X(RequestFlags, TRITONSERVER_Error*, (TRITONBACKEND_Request*, uint32_t*))   \
  X(RequestIsCancelled, TRITONSERVER_Error*, (TRITONBACKEND_Request*, bool*)) \
  X(RequestInputCount, TRITONSERVER_Error*,                                   \
    (TRITONBACKEND_Request*, uint32_t*))                                      \
  X(RequestInputByIndex, TRITONSERVER_Error*,                                 \
    (TRITONBACKEND_Request*, uint32_t, TRITONBACKEND_Input**))                \
  X(RequestInput, TRITONSERVER_Error*,                                        \
    (TRITONBACKEND_Request*, const char*, TRITONBACKEND_Input**))             \
  X(RequestOutputCount, TRITONSERVER_Error*,                                  \
    (TRITONBACKEND_Request*, uint32_t*))                                      \
  X(RequestOutputName, TRITONSERVER_Error*,                                   \
    (TRITONBACKEND_Request*, uint32_t, const char**))                         \
  X(RequestParameterCount, TRITONSERVER_Error*,                               \
    (TRITONBACKEND_Request*, uint32_t*))                                      \
  X(RequestParameter, TRITONSERVER_Error*,                                    \
    (TRITONBACKEND_Request*, uint32_t, const char**,                          \
     TRITONSERVER_ParameterType*, const void**))                              \
  X(RequestRelease, TRITONSERVER_Error*, (TRITONBACKEND_Request*, uint32_t))  \
  X(InputProperties, TRITONSERVER_Error*,                                     \
    (TRITONBACKEND_Input*, const char**, TRITONSERVER_DataType*,              \
     const int64_t**, uint32_t*, uint64_t*, uint32_t*))                       \
  X(InputBuffer, TRITONSERVER_Error*,                                         \
    (TRITONBACKEND_Input*, uint32_t, const void**, uint64_t*,                 \
     TRITONSERVER_MemoryType*, int64_t*))                                     \
  X(ResponseFactoryNew, TRITONSERVER_Error*,                                  \
    (TRITONBACKEND_ResponseFactory**, TRITONBACKEND_Request*))                \
  X(ResponseFactoryDelete, TRITONSERVER_Error*,                               \
    (TRITONBACKEND_ResponseFactory*))                                         \
  X(ResponseFactoryIsCancelled, TRITONSERVER_Error*,                          \
    (TRITONBACKEND_ResponseFactory*, bool*))                                  \
  X(ResponseFactorySendFlags, TRITONSERVER_Error*,                            \
    (TRITONBACKEND_ResponseFactory*, uint32_t))                               \
  X(ResponseNew, TRITONSERVER_Error*,                                         \
    (TRITONBACKEND_Response**, TRITONBACKEND_Request*))                       \
  X(ResponseNewFromFactory, TRITONSERVER_Error*,                              \
    (TRITONBACKEND_Response**, TRITONBACKEND_ResponseFactory*))               \
  X(ResponseDelete, TRITONSERVER_Error*, (TRITONBACKEND_Response*))           \
  X(ResponseOutput, TRITONSERVER_Error*,                                      \
    (TRITONBACKEND_Response*, TRITONBACKEND_Output**, const char*,            \
     TRITONSERVER_DataType, const int64_t*, uint32_t))                        \
  X(OutputBuffer, TRITONSERVER_Error*,                                        \
    (TRITONBACKEND_Output*, void**, uint64_t, TRITONSERVER_MemoryType*,       \
     int64_t*))                                                               \
  X(ResponseSetStringParameter, TRITONSERVER_Error*,                          \
    (TRITONBACKEND_Response*, const char*, const char*))                      \
  X(ResponseSetIntParameter, TRITONSERVER_Error*,                             \
    (TRITONBACKEND_Response*, const char*, int64_t))                          \
  X(ResponseSetBoolParameter, TRITONSERVER_Error*,                            \
    (TRITONBACKEND_Response*, const char*, bool))                             \
  X(ResponseSend, TRITONSERVER_Error*,                                        \
    (TRITONBACKEND_Response*, uint32_t, TRITONSERVER_Error*))

// Backend API functions that a model reads through when the core has them,
// with a fallback when it has not (python models still load): X(short
// name, return, (args)).
#define TRITON_BACKEND_OPTIONAL_FUNCTIONS(X)                                  \
  X(InferenceRequestTimeoutMicroseconds, TRITONSERVER_Error*,                 \
    (TRITONBACKEND_Request*, uint64_t*))

// The oldest C API this package is built and tested against (Triton 2.39's
// 1.25, the core of nvidia-pytriton 0.4.2): every required function above is
// in it. Newer minor versions only add functions; major 2 would break them.
constexpr uint32_t kRequiredApiMajor = 1;
constexpr uint32_t kRequiredApiMinor = 25;

struct TritonApi {
#define TRITON_DECLARE_MEMBER(name, ret, args, ...) ret(*name) args = nullptr;
  TRITON_REQUIRED_FUNCTIONS(TRITON_DECLARE_MEMBER)
  TRITON_OPTIONAL_FUNCTIONS(TRITON_DECLARE_MEMBER)
#undef TRITON_DECLARE_MEMBER
#define TRITON_DECLARE_BACKEND_MEMBER(name, ret, args) \
  ret(*TRITONBACKEND_##name) args = nullptr;
  TRITON_BACKEND_FUNCTIONS(TRITON_DECLARE_BACKEND_MEMBER)
  TRITON_BACKEND_OPTIONAL_FUNCTIONS(TRITON_DECLARE_BACKEND_MEMBER)
#undef TRITON_DECLARE_BACKEND_MEMBER
};
