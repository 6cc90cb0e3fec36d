# The agent ramdisk for real machines: `cmake --build build --target ramdisk` writes
# build/ramdisk/{vmlinuz,agent-initrd,SHA256SUMS,BUILDINFO} (upload them as the boot profile's
# kernel and initrd: docs/provisioning.md). The same builder as the end-to-end rig's
# (tests/e2e/build-images.sh: Debian's kernel package, busybox-static, dropbear, the agent and
# its libraries, /init from tests/e2e/ramdisk/init), with Debian's full amd64 kernel and the
# drivers GPU servers boot with, and the tools inventory and acceptance use where this
# machine has them (BUILDINFO lists which; `apt-get install` the missing ones and build
# again). Firmware blobs Debian ships only in non-free (the ice DDP package) are not put in:
# ice then runs in its safe mode, enough for PXE and the agent.
set(RP_RAMDISK_MODULES
    "virtio_pci virtio_net virtio_blk nvme ahci mlx5_core mlx5_ib ib_ipoib ib_umad rdma_ucm ice i40e ixgbe igb bnxt_en bnxt_re tg3 e1000e"
    CACHE STRING "Kernel modules of the agent ramdisk (their dependencies come along)")
set(RP_RAMDISK_TOOLS
    "dmidecode lspci ethtool nvme smartctl lldpd lldpcli ibstat ibv_devinfo ipmitool stress-ng fio"
    CACHE STRING "Programs put into the agent ramdisk, where this machine has them")
add_custom_target(ramdisk
  COMMAND ${CMAKE_COMMAND} -E env AGENT=$<TARGET_FILE:rackpilot-agent> FLAVOUR=amd64
          "MODULES=${RP_RAMDISK_MODULES}" "TOOLS=${RP_RAMDISK_TOOLS}" RAMDISK_ONLY=1
          sh ${CMAKE_SOURCE_DIR}/tests/e2e/build-images.sh ${CMAKE_BINARY_DIR}/ramdisk
  DEPENDS rackpilot-agent
  COMMENT "The agent ramdisk (build/ramdisk/agent-initrd)"
  USES_TERMINAL VERBATIM)
