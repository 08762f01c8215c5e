# cotune_add_plugin(<kind>-<name> SOURCES src... [LINK_LIBRARIES lib...] [OUTPUT_DIRECTORY dir])
#
# Builds libcotune-<kind>-<name>.so: a MODULE library with hidden visibility whose only exported
# symbol is cotune_plugin_entry_v1, linked with --no-undefined so a missing symbol fails the build
# and not a study. The target is named cotune-<kind>-<name>.
set(_COTUNE_PLUGIN_MAP "${CMAKE_CURRENT_LIST_DIR}/cotune_plugin.map")

function(cotune_add_plugin name)
  cmake_parse_arguments(ARG "" "OUTPUT_DIRECTORY" "SOURCES;LINK_LIBRARIES" ${ARGN})
  if(NOT ARG_SOURCES)
    message(FATAL_ERROR "cotune_add_plugin(${name}): SOURCES is required")
  endif()
  set(target cotune-${name})
  add_library(${target} MODULE ${ARG_SOURCES})
  target_link_libraries(${target} PRIVATE cotune::sdk ${ARG_LINK_LIBRARIES})
  set_target_properties(${target} PROPERTIES
    PREFIX "lib"
    OUTPUT_NAME "cotune-${name}"
    C_VISIBILITY_PRESET hidden
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    POSITION_INDEPENDENT_CODE ON)
  target_link_options(${target} PRIVATE
    "LINKER:--version-script=${_COTUNE_PLUGIN_MAP}" "LINKER:--no-undefined" "LINKER:--exclude-libs,ALL")
  set_property(GLOBAL APPEND PROPERTY COTUNE_PLUGIN_TARGETS ${target})
  if(ARG_OUTPUT_DIRECTORY)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${ARG_OUTPUT_DIRECTORY})
  elseif(DEFINED COTUNE_PLUGIN_OUTPUT_DIR)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${COTUNE_PLUGIN_OUTPUT_DIR})
  endif()
endfunction()
