# zlib, the gzip and deflate of the native gRPC transport's compressed
# messages (cpp/grpc_compression.cc): its sources are taken at configure
# time from Debian's pool (the upstream 1.3.1 release as Debian repacks it,
# `dfsg+really1.3.1`: contrib/ removed), pinned and checked, as nghttp2's
# are (cpp/nghttp2.cmake). Never committed. Built here rather than linked
# from the system: a build from the sdist needs no zlib headers, and a
# wheel needs no libz (not among the system libraries a manylinux wheel may
# use: auditwheel would graft a copy into it). Defines the static library `zlib_static` (the
# inflate and deflate parts only; hidden visibility: nothing of it is
# exported from _native, and a libz the process loads otherwise is not
# interposed).
include("${CMAKE_CURRENT_LIST_DIR}/pinned_archive.cmake")
include("${CMAKE_CURRENT_LIST_DIR}/third_party_notices.cmake")
set(ZLIB_VERSION "1.3.1")
set(ZLIB_URL "http://deb.debian.org/debian/pool/main/z/zlib/zlib_1.3.dfsg+really${ZLIB_VERSION}.orig.tar.gz")
set(ZLIB_SHA256 "60dd315c07f616887caa029408308a018ace66e3d142726a97db164b3b8f69fb")
set(_zlib_dir "${CMAKE_BINARY_DIR}/_zlib")
set(_zlib_archive "${_zlib_dir}/zlib_1.3.dfsg+really${ZLIB_VERSION}.orig.tar.gz")
set(_zlib_root "${_zlib_dir}/zlib-${ZLIB_VERSION}")

set(_zlib_hint "download it by hand (curl -o ${_zlib_archive} ${ZLIB_URL}), or build \
without the native gRPC transport: -C cmake.define.TRITONSERVER_NATIVE_GRPC=OFF")
pinned_url_download(zlib URL "${ZLIB_URL}" ARCHIVE "${_zlib_archive}" HINT "${_zlib_hint}")
pinned_archive_extract(zlib ARCHIVE "${_zlib_archive}" SHA256 "${ZLIB_SHA256}"
  HINT "${_zlib_hint}" DESTINATION "${_zlib_dir}"
  PATTERN "zlib-${ZLIB_VERSION}/*" EXTRACTED "${_zlib_root}/inflate.c")
# Its license (the zlib license), as it ships it.
third_party_notice(zlib "${ZLIB_VERSION}, the release tarball from Debian's pool" FILE "${_zlib_root}/LICENSE")

enable_language(C)
add_library(zlib_static STATIC
  "${_zlib_root}/adler32.c" "${_zlib_root}/crc32.c" "${_zlib_root}/deflate.c" "${_zlib_root}/inffast.c"
  "${_zlib_root}/inflate.c" "${_zlib_root}/inftrees.c" "${_zlib_root}/trees.c" "${_zlib_root}/zutil.c")
target_include_directories(zlib_static SYSTEM PUBLIC "${_zlib_root}")
set_target_properties(zlib_static PROPERTIES POSITION_INDEPENDENT_CODE ON C_VISIBILITY_PRESET hidden)
