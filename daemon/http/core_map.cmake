# armhive_core_map: the SVG core map of a host (render_core_map_svg). Included from
# daemon/http/CMakeLists.txt; paths are relative to this file so it can be included from anywhere.
if(NOT TARGET armhive_core_map)
  add_library(armhive_core_map ${CMAKE_CURRENT_LIST_DIR}/core_map_svg.cc)
  target_link_libraries(armhive_core_map PUBLIC armhive_core armhive_options
                        PRIVATE PkgConfig::LIBXML2)
endif()
