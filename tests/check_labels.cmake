# check_labels.cmake — fails when a ctest test of the build does not carry
# exactly one component label (tests/README.md), naming the test and the
# labels it has. Run on every build by the target tft_check_test_labels
# (tests/CMakeLists.txt), or by hand:
#   cmake -DCTEST=ctest -DBUILD_DIR=build -DCOMPONENTS=formats,kernels,... -P tests/check_labels.cmake
# It asks ctest, so it sees the labels as ctest selects by them: the
# directory labels of the component folders and each test's own.
foreach(v CTEST BUILD_DIR COMPONENTS)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "check_labels.cmake: -D${v}=... is needed")
  endif()
endforeach()
string(REPLACE "," ";" COMPONENTS "${COMPONENTS}")
set(_cfg)
if(CONFIG)
  set(_cfg -C ${CONFIG})
endif()

# The names of the tests ctest -N lists (with extra ARGN), in *out.
function(list_tests out)
  execute_process(COMMAND ${CTEST} --test-dir ${BUILD_DIR} -N ${_cfg} ${ARGN}
                  OUTPUT_VARIABLE text RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "check_labels.cmake: ctest -N ${ARGN} in ${BUILD_DIR} failed (${rc})")
  endif()
  string(REGEX MATCHALL "Test +#[0-9]+: [^\n]+" lines "${text}")
  set(names)
  foreach(l ${lines})
    string(REGEX REPLACE "^Test +#[0-9]+: " "" n "${l}")
    list(APPEND names "${n}")
  endforeach()
  set(${out} "${names}" PARENT_SCOPE)
endfunction()

list_tests(_all)
foreach(c ${COMPONENTS})
  list_tests(_in -L "^${c}$")
  foreach(t ${_in})
    list(APPEND "_labels_${t}" ${c})
  endforeach()
endforeach()
set(_bad)
foreach(t ${_all})
  list(LENGTH "_labels_${t}" n)
  if(NOT n EQUAL 1)
    if(n EQUAL 0)
      set(_has "none")
    else()
      string(REPLACE ";" ", " _has "${_labels_${t}}")
    endif()
    string(APPEND _bad "\n  ${t}: ${_has}")
  endif()
endforeach()
if(_bad)
  string(REPLACE ";" ", " _list "${COMPONENTS}")
  message(FATAL_ERROR "tests with other than one component label (${_list}); a test gets its "
                      "component's label from its folder, tests/<component>/ (tests/README.md):${_bad}")
endif()
