# Taking a third-party source archive at configure time (cpp/llhttp.cmake,
# cpp/nghttp2.cmake, cpp/yyjson.cmake, cpp/zlib.cmake): a source distribution
# from the package index, fetched with pip, or a release tarball from
# Debian's pool, fetched by URL; then the common last step: check the
# archive against its pinned sha256 and extract the part that is built, once.
include_guard(GLOBAL)

# pinned_url_download(<name> URL <url> ARCHIVE <file> HINT <how to fix>)
# Downloads <url> into <file> unless <file> is there (through <file>.part:
# an interrupted download leaves no <file>); a failure is a configure error
# naming <name>, the URL and <how to fix>.
function(pinned_url_download name)
  cmake_parse_arguments(PARSE_ARGV 1 _pu "" "URL;ARCHIVE;HINT" "")
  if(EXISTS "${_pu_ARCHIVE}")
    return()
  endif()
  get_filename_component(_dir "${_pu_ARCHIVE}" DIRECTORY)
  file(MAKE_DIRECTORY "${_dir}")
  message(STATUS "${name}: downloading ${_pu_URL}")
  file(DOWNLOAD "${_pu_URL}" "${_pu_ARCHIVE}.part" STATUS _status TIMEOUT 300)
  list(GET _status 0 _rc)
  if(NOT _rc EQUAL 0)
    file(REMOVE "${_pu_ARCHIVE}.part")
    message(FATAL_ERROR "${name}: could not download ${_pu_URL} (${_status})\n${_pu_HINT}")
  endif()
  file(RENAME "${_pu_ARCHIVE}.part" "${_pu_ARCHIVE}")
endfunction()

# pinned_sdist_download(<name> PACKAGE <project> VERSION <version>
#                       DIRECTORY <dir> ARCHIVE <file pip saves> HINT <how to fix>)
# `pip download`s the project's source distribution into <dir> unless
# <file> is there; a failure is a configure error naming <name> and <how to fix>.
function(pinned_sdist_download name)
  cmake_parse_arguments(PARSE_ARGV 1 _ps "" "PACKAGE;VERSION;DIRECTORY;ARCHIVE;HINT" "")
  if(EXISTS "${_ps_ARCHIVE}")
    return()
  endif()
  file(MAKE_DIRECTORY "${_ps_DIRECTORY}")
  message(STATUS "${name}: pip download ${_ps_PACKAGE}==${_ps_VERSION} (sdist)")
  execute_process(
    COMMAND "${Python_EXECUTABLE}" -m pip download --quiet --no-deps --no-binary :all:
            "${_ps_PACKAGE}==${_ps_VERSION}" -d "${_ps_DIRECTORY}"
    RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _out)
  if(NOT _rc EQUAL 0 OR NOT EXISTS "${_ps_ARCHIVE}")
    message(FATAL_ERROR "${name}: could not get the ${_ps_PACKAGE} ${_ps_VERSION} source \
distribution with pip (${_rc}): ${_out}\n${_ps_HINT}")
  endif()
endfunction()

# pinned_archive_extract(<name> ARCHIVE <file> SHA256 <hex> HINT <how to fix>
#                        DESTINATION <dir> PATTERN <glob in the archive>
#                        EXTRACTED <file that exists once extracted>)
# A sha256 mismatch is a configure error naming <name>, the archive, both
# digests and <how to fix>.
function(pinned_archive_extract name)
  cmake_parse_arguments(PARSE_ARGV 1 _pa "" "ARCHIVE;SHA256;HINT;DESTINATION;PATTERN;EXTRACTED" "")
  file(SHA256 "${_pa_ARCHIVE}" _sha)
  if(NOT _sha STREQUAL _pa_SHA256)
    message(FATAL_ERROR "${name}: ${_pa_ARCHIVE} has sha256 ${_sha}, expected \
${_pa_SHA256}: delete it and configure again, or ${_pa_HINT}")
  endif()
  if(NOT EXISTS "${_pa_EXTRACTED}")
    file(ARCHIVE_EXTRACT INPUT "${_pa_ARCHIVE}" DESTINATION "${_pa_DESTINATION}"
         PATTERNS "${_pa_PATTERN}")
  endif()
endfunction()
