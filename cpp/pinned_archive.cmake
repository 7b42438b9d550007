# The common last step of taking a third-party source archive at configure
# time (cpp/llhttp.cmake, cpp/nghttp2.cmake): check the downloaded archive
# against its pinned sha256, then extract the part of it that is built, once.
include_guard(GLOBAL)

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
