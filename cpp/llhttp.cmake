# llhttp, the HTTP/1.1 parser of the native KServe HTTP transport
# (cpp/http_transport.cc): its C sources are taken at configure time from
# httptools' source distribution, the one channel to them on every machine
# that builds this package (pip download from the package index), pinned
# and checked. Never committed. Defines the static library `llhttp`.
include("${CMAKE_CURRENT_LIST_DIR}/pinned_archive.cmake")
include("${CMAKE_CURRENT_LIST_DIR}/third_party_notices.cmake")
set(LLHTTP_SDIST_VERSION "0.6.4")
set(LLHTTP_SDIST_SHA256 "4e93eee4add6493b59a5c514da98c939b244fce4a0d8879cd3f466562f4b7d5c")
set(_llhttp_dir "${CMAKE_BINARY_DIR}/_llhttp")
set(_llhttp_archive "${_llhttp_dir}/httptools-${LLHTTP_SDIST_VERSION}.tar.gz")
set(_llhttp_root "${_llhttp_dir}/httptools-${LLHTTP_SDIST_VERSION}/vendor/llhttp")

set(_llhttp_hint "download it by hand (python -m pip download --no-deps --no-binary :all: \
httptools==${LLHTTP_SDIST_VERSION} -d ${_llhttp_dir}), or build without the native HTTP \
transport: -C cmake.define.TRITONSERVER_NATIVE_HTTP=OFF")
pinned_sdist_download(llhttp PACKAGE httptools VERSION "${LLHTTP_SDIST_VERSION}" DIRECTORY "${_llhttp_dir}"
  ARCHIVE "${_llhttp_archive}" HINT "${_llhttp_hint}")
pinned_archive_extract(llhttp ARCHIVE "${_llhttp_archive}" SHA256 "${LLHTTP_SDIST_SHA256}"
  HINT "${_llhttp_hint}" DESTINATION "${_llhttp_dir}"
  PATTERN "httptools-${LLHTTP_SDIST_VERSION}/vendor/llhttp/*" EXTRACTED "${_llhttp_root}/src/llhttp.c")

enable_language(C)
add_library(llhttp STATIC "${_llhttp_root}/src/api.c" "${_llhttp_root}/src/http.c"
                          "${_llhttp_root}/src/llhttp.c")
target_include_directories(llhttp SYSTEM PUBLIC "${_llhttp_root}/include")
set_target_properties(llhttp PROPERTIES POSITION_INDEPENDENT_CODE ON C_VISIBILITY_PRESET hidden)
third_party_notice(llhttp "from the httptools ${LLHTTP_SDIST_VERSION} source distribution"
  FILE "${_llhttp_root}/LICENSE-MIT")
