# Adds every immediate subdirectory of the current source dir that has a
# CMakeLists.txt, so parts can be added without editing a shared list.
function(tft_add_subdirs)
  file(GLOB _children RELATIVE ${CMAKE_CURRENT_SOURCE_DIR} ${CMAKE_CURRENT_SOURCE_DIR}/*)
  list(SORT _children)
  foreach(c ${_children})
    if(IS_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}/${c} AND EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/${c}/CMakeLists.txt)
      add_subdirectory(${c})
    endif()
  endforeach()
endfunction()
