# Debian 12 packages with CPack's DEB generator: rackpilotd (server, web view compiled in,
# configuration, units, man page), rackpilot (CLI) and rackpilot-agent. CPack rather than a
# debian/ directory and dpkg-buildpackage: the build is CMake's already, the three packages
# are its install components, and `cmake --build build --target package` needs no second
# description of the build; dpkg-shlibdeps still computes Depends from the binaries. The
# maintainer scripts are in packaging/debian/PACKAGE/, the units in packaging/systemd/.
# Tested by tests/package/package-test.sh (ctest -L package).
# `cmake --build B --target rackpilotd rackpilot rackpilot-agent rp_package_files` then
# `cpack -G DEB` in B: the packages need those, not the tests.
set(CMAKE_SKIP_INSTALL_ALL_DEPENDENCY ON)
set(RP_PACKAGE_MAINTAINER "Rackpilot team <team@rackpilot.dev>"
    CACHE STRING "Maintainer of the Debian packages (control file and changelog)")
set(RP_PKG ${CMAKE_CURRENT_LIST_DIR})
set(RP_PKG_OUT ${CMAKE_BINARY_DIR}/packaging)
file(MAKE_DIRECTORY ${RP_PKG_OUT})

# The packaged configuration: docs/rackpilotd.conf, its data under /var/lib.
file(READ ${CMAKE_SOURCE_DIR}/docs/rackpilotd.conf rp_conf)
# The packaged layout: the data under /var/lib; dnsmasq's host file where dnsmasq can read
# it, and no pid file (the sandboxed server cannot signal dnsmasq: rackpilot-dnsmasq.path does).
set(rp_conf_pkg "${rp_conf}")
foreach(pair
        "\ndata_dir = ./var\n|\ndata_dir = /var/lib/rackpilot\n"
        "\n#dnsmasq_hosts = /var/lib/rackpilot/dnsmasq.hosts\n|\n#dnsmasq_hosts = /var/lib/rackpilot-dhcp/hosts\n"
        "\n#dnsmasq_pidfile = /run/rackpilot-dnsmasq.pid\n|\n# (packaged: leave dnsmasq_pidfile unset and enable rackpilot-dnsmasq.path)\n")
  string(REPLACE "|" ";" pair "${pair}")
  list(GET pair 0 from)
  list(GET pair 1 to)
  string(FIND "${rp_conf_pkg}" "${from}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "packaging: docs/rackpilotd.conf has no '${from}' to replace")
  endif()
  string(REPLACE "${from}" "${to}" rp_conf_pkg "${rp_conf_pkg}")
endforeach()
file(WRITE ${RP_PKG_OUT}/rackpilotd.conf "${rp_conf_pkg}")

# Man pages and changelogs, compressed as Debian wants them (gzip -n: reproducible).
set(rp_gz)
foreach(src docs/rackpilotd.8 docs/rackpilot.1 docs/rackpilot-agent.8)
  get_filename_component(name ${src} NAME)
  add_custom_command(OUTPUT ${RP_PKG_OUT}/${name}.gz
                     COMMAND gzip -9nc ${CMAKE_SOURCE_DIR}/${src} > ${RP_PKG_OUT}/${name}.gz
                     DEPENDS ${CMAKE_SOURCE_DIR}/${src})
  list(APPEND rp_gz ${RP_PKG_OUT}/${name}.gz)
endforeach()
string(TIMESTAMP rp_date "%a, %d %b %Y %H:%M:%S +0000" UTC)
foreach(pkg rackpilotd rackpilot rackpilot-agent)
  file(WRITE ${RP_PKG_OUT}/${pkg}.changelog
       "${pkg} (${PROJECT_VERSION}) unstable; urgency=medium\n\n"
       "  * Built from the rackpilot source tree.\n\n"
       " -- ${RP_PACKAGE_MAINTAINER}  ${rp_date}\n")
  add_custom_command(OUTPUT ${RP_PKG_OUT}/${pkg}/changelog.gz
                     COMMAND ${CMAKE_COMMAND} -E make_directory ${RP_PKG_OUT}/${pkg}
                     COMMAND gzip -9nc ${RP_PKG_OUT}/${pkg}.changelog > ${RP_PKG_OUT}/${pkg}/changelog.gz
                     DEPENDS ${RP_PKG_OUT}/${pkg}.changelog)
  list(APPEND rp_gz ${RP_PKG_OUT}/${pkg}/changelog.gz)
endforeach()
add_custom_target(rp_package_files ALL DEPENDS ${rp_gz})

# rackpilotd
install(TARGETS rackpilotd RUNTIME DESTINATION sbin COMPONENT server)
install(FILES ${RP_PKG_OUT}/rackpilotd.conf DESTINATION /etc/rackpilot COMPONENT server)
install(FILES ${RP_PKG}/systemd/rackpilotd.service ${RP_PKG}/systemd/rackpilot-dnsmasq.path
              ${RP_PKG}/systemd/rackpilot-dnsmasq.service
        DESTINATION /lib/systemd/system COMPONENT server)
install(FILES ${RP_PKG}/systemd/rackpilot.sysusers DESTINATION lib/sysusers.d
        RENAME rackpilot.conf COMPONENT server)
install(FILES ${RP_PKG}/systemd/rackpilot.tmpfiles DESTINATION lib/tmpfiles.d
        RENAME rackpilot.conf COMPONENT server)
install(FILES ${RP_PKG_OUT}/rackpilotd.8.gz DESTINATION share/man/man8 COMPONENT server)
install(FILES ${CMAKE_SOURCE_DIR}/README.md ${CMAKE_SOURCE_DIR}/docs/deployment.md
              ${CMAKE_SOURCE_DIR}/docs/security.md ${CMAKE_SOURCE_DIR}/docs/webhooks.md
              ${CMAKE_SOURCE_DIR}/docs/provisioning.md ${CMAKE_SOURCE_DIR}/docs/dnsmasq.conf
              ${CMAKE_SOURCE_DIR}/docs/openapi.yaml ${RP_PKG}/debian/copyright
              ${RP_PKG_OUT}/rackpilotd/changelog.gz
        DESTINATION share/doc/rackpilotd COMPONENT server)
# rackpilot (CLI)
install(TARGETS rackpilot RUNTIME DESTINATION bin COMPONENT cli)
install(FILES ${RP_PKG_OUT}/rackpilot.1.gz DESTINATION share/man/man1 COMPONENT cli)
install(FILES ${RP_PKG}/debian/copyright ${RP_PKG_OUT}/rackpilot/changelog.gz
        DESTINATION share/doc/rackpilot COMPONENT cli)
# rackpilot-agent
install(TARGETS rackpilot-agent RUNTIME DESTINATION sbin COMPONENT agent)
install(FILES ${RP_PKG}/systemd/rackpilot-agent.service DESTINATION /lib/systemd/system
        COMPONENT agent)
install(FILES ${RP_PKG_OUT}/rackpilot-agent.8.gz DESTINATION share/man/man8 COMPONENT agent)
install(FILES ${RP_PKG}/debian/copyright ${RP_PKG_OUT}/rackpilot-agent/changelog.gz
        DESTINATION share/doc/rackpilot-agent COMPONENT agent)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME rackpilot)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_PACKAGE_CONTACT "${RP_PACKAGE_MAINTAINER}")
set(CPACK_WARN_ON_ABSOLUTE_INSTALL_DESTINATION OFF)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL server cli agent)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "https://localhost/rackpilot")
set(CPACK_DEBIAN_SERVER_PACKAGE_NAME rackpilotd)
set(CPACK_DEBIAN_CLI_PACKAGE_NAME rackpilot)
set(CPACK_DEBIAN_AGENT_PACKAGE_NAME rackpilot-agent)
set(CPACK_COMPONENT_SERVER_DESCRIPTION
    "bare-metal provisioning and fleet-management server\nrackpilotd: a REST API and web view over IPMI and Redfish BMCs, PXE\nprovisioning with its node agent, firmware and BIOS rollouts, rack\nacceptance, exports for Prometheus, Ansible and Slurm, webhooks; on SQLite\nor PostgreSQL.")
set(CPACK_COMPONENT_CLI_DESCRIPTION
    "command-line client of the Rackpilot server\nrackpilot: every rackpilotd API action as a command, with tables for\npeople and JSON or exports for programs.")
set(CPACK_COMPONENT_AGENT_DESCRIPTION
    "node agent of the Rackpilot server\nrackpilot-agent: registers a node, reports its inventory, sends\nheartbeats and runs the step plans rackpilotd pushes over SSH.")
# procps: kill, for the unit's ExecReload.
set(CPACK_DEBIAN_SERVER_PACKAGE_DEPENDS "procps")
set(CPACK_DEBIAN_SERVER_PACKAGE_SUGGESTS "dnsmasq-base, ipxe, postgresql")
set(CPACK_DEBIAN_SERVER_PACKAGE_CONTROL_EXTRA
    ${RP_PKG_OUT}/server/conffiles ${RP_PKG}/debian/rackpilotd/postinst
    ${RP_PKG}/debian/rackpilotd/prerm ${RP_PKG}/debian/rackpilotd/postrm)
set(CPACK_DEBIAN_AGENT_PACKAGE_CONTROL_EXTRA
    ${RP_PKG}/debian/rackpilot-agent/postinst ${RP_PKG}/debian/rackpilot-agent/prerm
    ${RP_PKG}/debian/rackpilot-agent/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
file(MAKE_DIRECTORY ${RP_PKG_OUT}/server)
file(WRITE ${RP_PKG_OUT}/server/conffiles "/etc/rackpilot/rackpilotd.conf\n")
include(CPack)
