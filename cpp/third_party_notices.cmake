# The license notices of the third-party code compiled into this package's
# libraries (MIT and BSD licenses ask that their text travel with every
# copy, binaries included): each part that compiles such code in registers
# its notice with third_party_notice(), and install_third_party_notices()
# writes them into one file of the package, tritonserver/THIRD_PARTY_NOTICES.txt
# (tests/test_wheel_smoke.py checks it).
include_guard(GLOBAL)

# third_party_notice(<name> <version and origin> FILE <file> [HEADER_COMMENT])
# Registers the license text <file> for <name>; with HEADER_COMMENT, the
# text is the leading comment of the source file <file> (a library that
# states its license there), its comment markers removed. A missing file is
# a configure error: the package must not ship without the notice.
function(third_party_notice name origin)
  cmake_parse_arguments(PARSE_ARGV 2 _tn "HEADER_COMMENT" "FILE" "")
  if(NOT EXISTS "${_tn_FILE}")
    message(FATAL_ERROR "${name}: its license notice ${_tn_FILE} is missing; the package cannot be \
built without it (delete the build folder and configure again to extract it afresh)")
  endif()
  file(READ "${_tn_FILE}" _text)
  if(_tn_HEADER_COMMENT)
    string(FIND "${_text}" "*/" _end)
    if(_end LESS 0)
      message(FATAL_ERROR "${name}: ${_tn_FILE} does not begin with a comment holding its license")
    endif()
    string(SUBSTRING "${_text}" 0 ${_end} _text)
    string(REGEX REPLACE "^/\\*[*=]*" "" _text "${_text}")
    # each line's leading " * " (or " ")
    string(REGEX REPLACE "\n ?(\\* ?)?" "\n" _text "\n${_text}")
    string(REGEX REPLACE "\n[ =*]*$" "" _text "${_text}")
  endif()
  string(STRIP "${_text}" _text)
  set_property(GLOBAL APPEND_STRING PROPERTY TRITONSERVER_THIRD_PARTY_NOTICES
               "\n\n==== ${name} (${origin})\n\n${_text}\n")
endfunction()

# install_third_party_notices(<destination in the package>)
function(install_third_party_notices destination)
  get_property(_notices GLOBAL PROPERTY TRITONSERVER_THIRD_PARTY_NOTICES)
  set(_file "${CMAKE_BINARY_DIR}/THIRD_PARTY_NOTICES.txt")
  file(WRITE "${_file}" "Third-party code compiled into this package's native libraries, and its license \
notices.\nThe package itself: see its LICENSE (BSD-3-Clause).${_notices}")
  install(FILES "${_file}" DESTINATION "${destination}")
endfunction()
