# nghttp2, the HTTP/2 library of the native gRPC transport
# (cpp/grpc_transport.cc): its lib/ sources are taken at configure time
# from Debian's pool (the upstream release tarball, as Debian ships it),
# pinned and checked. Never committed. Defines the static library
# `nghttp2_static` (hidden visibility: nothing of it is exported from _native).
include("${CMAKE_CURRENT_LIST_DIR}/pinned_archive.cmake")
include("${CMAKE_CURRENT_LIST_DIR}/third_party_notices.cmake")
set(NGHTTP2_VERSION "1.64.0")
set(NGHTTP2_VERSION_NUM "0x014000")
set(NGHTTP2_URL "http://deb.debian.org/debian/pool/main/n/nghttp2/nghttp2_${NGHTTP2_VERSION}.orig.tar.gz")
set(NGHTTP2_SHA256 "b452dc69a1fcbc9375389b8b154175d8b7b125cdd713fc426774c2b79a1ebd77")
set(_nghttp2_dir "${CMAKE_BINARY_DIR}/_nghttp2")
set(_nghttp2_archive "${_nghttp2_dir}/nghttp2_${NGHTTP2_VERSION}.orig.tar.gz")
set(_nghttp2_root "${_nghttp2_dir}/nghttp2-${NGHTTP2_VERSION}/lib")

set(_nghttp2_hint "download it by hand (curl -o ${_nghttp2_archive} ${NGHTTP2_URL}), or build \
without the native gRPC transport: -C cmake.define.TRITONSERVER_NATIVE_GRPC=OFF")
pinned_url_download(nghttp2 URL "${NGHTTP2_URL}" ARCHIVE "${_nghttp2_archive}" HINT "${_nghttp2_hint}")
pinned_archive_extract(nghttp2 ARCHIVE "${_nghttp2_archive}" SHA256 "${NGHTTP2_SHA256}"
  HINT "${_nghttp2_hint}" DESTINATION "${_nghttp2_dir}"
  PATTERN "nghttp2-${NGHTTP2_VERSION}/lib/*" EXTRACTED "${_nghttp2_root}/nghttp2_session.c")
# Its license (MIT), beside the sources.
pinned_archive_extract(nghttp2 ARCHIVE "${_nghttp2_archive}" SHA256 "${NGHTTP2_SHA256}"
  HINT "${_nghttp2_hint}" DESTINATION "${_nghttp2_dir}"
  PATTERN "nghttp2-${NGHTTP2_VERSION}/COPYING" EXTRACTED "${_nghttp2_dir}/nghttp2-${NGHTTP2_VERSION}/COPYING")
third_party_notice(nghttp2 "${NGHTTP2_VERSION}, the release tarball from Debian's pool"
  FILE "${_nghttp2_dir}/nghttp2-${NGHTTP2_VERSION}/COPYING")
# nghttp2ver.h from its template (what nghttp2's own build makes of it).
set(PACKAGE_VERSION "${NGHTTP2_VERSION}")
set(PACKAGE_VERSION_NUM "${NGHTTP2_VERSION_NUM}")
configure_file("${_nghttp2_root}/includes/nghttp2/nghttp2ver.h.in"
               "${_nghttp2_dir}/include/nghttp2/nghttp2ver.h" @ONLY)

enable_language(C)
file(GLOB _nghttp2_sources "${_nghttp2_root}/*.c")
add_library(nghttp2_static STATIC ${_nghttp2_sources})
target_include_directories(nghttp2_static SYSTEM PUBLIC "${_nghttp2_root}/includes" "${_nghttp2_dir}/include")
target_compile_definitions(nghttp2_static PUBLIC NGHTTP2_STATICLIB PRIVATE BUILDING_NGHTTP2 HAVE_ARPA_INET_H
                           HAVE_NETINET_IN_H HAVE_CLOCK_GETTIME HAVE_DECL_CLOCK_MONOTONIC=1)
set_target_properties(nghttp2_static PROPERTIES POSITION_INDEPENDENT_CODE ON C_VISIBILITY_PRESET hidden)
