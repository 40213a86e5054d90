# Where `cmake --install` puts armhive (the FHS places, with CMAKE_INSTALL_PREFIX=/usr as the
# packages build it) and how scripts/package turns that into three Debian packages:
#   armhived      the daemon, its systemd unit, the example configuration
#   armhive       the CLI
#   armhive-image the image builder and its recipes
include(GNUInstallDirs)
# `cpack` installs only the three binaries, not the whole tree (tests, benchmarks) first.
set(CMAKE_SKIP_INSTALL_ALL_DEPENDENCY ON)

install(TARGETS armhived RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT armhived)
install(TARGETS armhive RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT armhive)
install(TARGETS armhive-image RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT armhive-image)

# The unit names /usr/bin/armhived; systemd reads units from /lib/systemd/system on Debian 12.
install(FILES examples/armhived.service DESTINATION lib/systemd/system COMPONENT armhived)
# The configuration a fresh install starts from (a conffile: upgrades keep the operator's).
# It names the secret files, never holds a secret, so it is world-readable like other configs.
install(FILES examples/armhived.toml DESTINATION ${CMAKE_INSTALL_FULL_SYSCONFDIR}/armhive
        COMPONENT armhived)
install(FILES examples/armhived-honeycomb.toml examples/armhived-thunderx.toml
              examples/armhived-lab.toml
        DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/armhived/examples COMPONENT armhived)
install(FILES README.md ARCHITECTURE.md docs/reliability.md docs/hostile-input.md
        DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/armhived COMPONENT armhived)
install(FILES README.md DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/armhive COMPONENT armhive)
install(DIRECTORY images/recipes/ DESTINATION ${CMAKE_INSTALL_DATADIR}/armhive/recipes
        USE_SOURCE_PERMISSIONS COMPONENT armhive-image)
install(FILES packaging/armhive-image.lintian-overrides
        DESTINATION ${CMAKE_INSTALL_DATADIR}/lintian/overrides RENAME armhive-image
        COMPONENT armhive-image)
install(FILES images/README.md DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/armhive-image
        COMPONENT armhive-image)

# Each binary's manual page (packaging/man/, written by hand; scripts/check-man-pages keeps it
# in step with the binary's --help), gzip-compressed without name or time stamp (reproducible)
# at configure time, as the changelog below; an edited page configures again.
foreach(page armhived.8 armhive.1 armhive-image.1)
  string(REGEX REPLACE "\\.[18]$" "" component ${page})
  string(REGEX REPLACE "^.*\\." "" section ${page})
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS
               ${PROJECT_SOURCE_DIR}/packaging/man/${page})
  file(MAKE_DIRECTORY ${PROJECT_BINARY_DIR}/man)
  execute_process(COMMAND gzip -n -9 -c ${PROJECT_SOURCE_DIR}/packaging/man/${page}
                  OUTPUT_FILE ${PROJECT_BINARY_DIR}/man/${page}.gz COMMAND_ERROR_IS_FATAL ANY)
  install(FILES ${PROJECT_BINARY_DIR}/man/${page}.gz
          DESTINATION ${CMAKE_INSTALL_MANDIR}/man${section} COMPONENT ${component})
endforeach()

# Every package's copyright and (native package) changelog, as Debian policy wants them.
execute_process(COMMAND gzip -n -9 -c ${PROJECT_SOURCE_DIR}/packaging/changelog
                OUTPUT_FILE ${PROJECT_BINARY_DIR}/changelog.gz)
foreach(package armhived armhive armhive-image)
  install(FILES packaging/copyright ${PROJECT_BINARY_DIR}/changelog.gz
          DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/${package} COMPONENT ${package})
endforeach()

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME armhive)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "armhive maintainers <maintainers@armhive.dev>")
set(CPACK_PACKAGE_VENDOR "armhive")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL armhived armhive armhive-image)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# Depends: from the shared libraries each binary links (dpkg-shlibdeps), plus what they run.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_ARMHIVED_PACKAGE_NAME armhived)
set(CPACK_DEBIAN_ARMHIVED_PACKAGE_DEPENDS "libvirt-daemon-system, nftables, openssh-client")
set(CPACK_DEBIAN_ARMHIVED_PACKAGE_RECOMMENDS "armhive, armhive-image, qemu-system-arm")
set(CPACK_DEBIAN_ARMHIVED_DESCRIPTION
    "ephemeral aarch64 KVM VMs for CI, leased over a REST API\narmhived keeps warm pools of pinned aarch64 virtual machines on libvirt\nhosts and hands them to CI jobs and developers through a REST API; a\nlease ends with its VM.")
set(CPACK_DEBIAN_ARMHIVED_PACKAGE_CONTROL_EXTRA
    ${PROJECT_SOURCE_DIR}/packaging/armhived/conffiles
    ${PROJECT_SOURCE_DIR}/packaging/armhived/postinst
    ${PROJECT_SOURCE_DIR}/packaging/armhived/prerm
    ${PROJECT_SOURCE_DIR}/packaging/armhived/postrm)
set(CPACK_DEBIAN_ARMHIVE_PACKAGE_NAME armhive)
set(CPACK_DEBIAN_ARMHIVE_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_ARMHIVE_DESCRIPTION
    "command-line client of armhived\nLeases, SSH, file copies, benchmarks and reports of an armhived's\naarch64 VMs.")
set(CPACK_DEBIAN_ARMHIVE-IMAGE_PACKAGE_NAME armhive-image)
set(CPACK_DEBIAN_ARMHIVE-IMAGE_PACKAGE_DEPENDS "qemu-utils")
set(CPACK_DEBIAN_ARMHIVE-IMAGE_DESCRIPTION
    "builds armhive's guest images from layered recipes\nDebian arm64 guest images for armhived's pools, built with libguestfs\nfrom the recipes in /usr/share/armhive/recipes and kept in a\ncontent-keyed catalogue.")
include(CPack)
