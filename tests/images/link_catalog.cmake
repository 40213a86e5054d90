# cmake -DCATALOG=DIR -DLINK=PATH -P link_catalog.cmake
# Points LINK (the e2e state's images/) at the persistent catalogue, replacing whatever is there
# (an older build tree may hold a real directory from before the catalogue was shared).
if(NOT CATALOG OR NOT LINK)
  message(FATAL_ERROR "link_catalog.cmake needs -DCATALOG=... -DLINK=...")
endif()
if(IS_SYMLINK "${LINK}")
  file(READ_SYMLINK "${LINK}" current)
  if(current STREQUAL CATALOG)
    return()
  endif()
endif()
file(REMOVE_RECURSE "${LINK}")
get_filename_component(parent "${LINK}" DIRECTORY)
file(MAKE_DIRECTORY "${parent}")
file(CREATE_LINK "${CATALOG}" "${LINK}" SYMBOLIC)
