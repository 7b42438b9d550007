# yyjson, the JSON reader of the KServe infer fast path (cpp/kserve_infer.cc:
# the request's JSON header read without the GIL): its C source is taken at
# configure time from the yyjson package's source distribution (py_yyjson,
# which bundles yyjson 0.10.0), the one channel to it on every machine that
# builds this package (pip download from the package index), pinned and
# checked. Never committed. Defines the static library `yyjson` (reader only).
include("${CMAKE_CURRENT_LIST_DIR}/pinned_archive.cmake")
include("${CMAKE_CURRENT_LIST_DIR}/third_party_notices.cmake")
set(YYJSON_SDIST_VERSION "4.0.6")
set(YYJSON_SDIST_SHA256 "fcd4dc15c1e39a30bf9fa85d56903029111506860fc3080ab0d81c6c6dacaa8c")
set(_yyjson_dir "${CMAKE_BINARY_DIR}/_yyjson")
set(_yyjson_archive "${_yyjson_dir}/yyjson-${YYJSON_SDIST_VERSION}.tar.gz")
set(_yyjson_root "${_yyjson_dir}/yyjson-${YYJSON_SDIST_VERSION}/yyjson")

set(_yyjson_hint "download it by hand (python -m pip download --no-deps --no-binary :all: \
yyjson==${YYJSON_SDIST_VERSION} -d ${_yyjson_dir})")
pinned_sdist_download(yyjson PACKAGE yyjson VERSION "${YYJSON_SDIST_VERSION}" DIRECTORY "${_yyjson_dir}"
  ARCHIVE "${_yyjson_archive}" HINT "${_yyjson_hint}")
pinned_archive_extract(yyjson ARCHIVE "${_yyjson_archive}" SHA256 "${YYJSON_SDIST_SHA256}"
  HINT "${_yyjson_hint}" DESTINATION "${_yyjson_dir}"
  PATTERN "yyjson-${YYJSON_SDIST_VERSION}/yyjson/yyjson.*" EXTRACTED "${_yyjson_root}/yyjson.c")

enable_language(C)
add_library(yyjson STATIC "${_yyjson_root}/yyjson.c")
target_include_directories(yyjson SYSTEM PUBLIC "${_yyjson_root}")
# The reader alone: what kserve_infer.cc uses.
target_compile_definitions(yyjson PUBLIC YYJSON_DISABLE_WRITER=1 YYJSON_DISABLE_UTILS=1)
set_target_properties(yyjson PROPERTIES POSITION_INDEPENDENT_CODE ON C_VISIBILITY_PRESET hidden)
# yyjson states its license (MIT) at the head of its header.
third_party_notice(yyjson "0.10.0, from the yyjson ${YYJSON_SDIST_VERSION} source distribution"
  FILE "${_yyjson_root}/yyjson.h" HEADER_COMMENT)
