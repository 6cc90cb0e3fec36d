#!/usr/bin/env python3
"""sol-relay.py TTYLINK FIFO - the serial line between one e2e VM and its BMC's SOL.

ipmi_sim opens its SOL serial port (lan.conf `sol "TTYLINK" 115200 nortscts`) once, when it
starts, and keeps it; the VM's QEMU comes and goes with every power cycle. This relay stays for
the BMC's whole life and joins:
  - a pty whose slave TTYLINK links to: the BMC's end. The relay holds both ends, so the BMC's
    end never sees a hangup while no QEMU runs;
  - the FIFOs FIFO.out (what the VM prints) and FIFO.in (what is typed at the BMC, for the VM):
    every QEMU of the VM opens them (`-chardev pipe,path=FIFO,...`). The relay holds both open
    read-write, so neither side ever sees an end of file when QEMU stops or starts.

Why FIFOs, not a Unix socket: QEMU's 16550 writes a byte at a time, and its chardev logs a
byte the backend refuses (EAGAIN) and then the byte again when the UART sends it once more, so
console.log (that log) would hold some bytes twice. Over a Unix socket that happened on a loaded
host (a socket charges each unread one-byte write a whole buffer's worth of its send space, so
a few hundred fill it while the relay waits for a CPU); a FIFO holds 64 KiB of bytes.

The relay never holds QEMU up either: whatever the BMC's end cannot take, beyond 64 KiB kept,
is dropped, as on a serial line without flow control (ipmi_sim stops reading while its SOL
client has not acked). What is typed while no QEMU runs waits in FIFO.in (64 KiB at most);
vm-run.sh empties it before a QEMU starts.

Logs its start, drops (at most one line per 10 s) and, on SIGTERM, the byte counts to stderr;
on SIGTERM it also removes TTYLINK and the FIFOs.
"""
import os
import select
import signal
import sys
import time
import tty

CAP = 64 * 1024


def log(msg):
    sys.stderr.write("%s sol-relay: %s\n" % (time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), msg))
    sys.stderr.flush()


def main():
    if len(sys.argv) != 3:
        sys.stderr.write("usage: sol-relay.py TTYLINK FIFO\n")
        return 2
    link, base = sys.argv[1], sys.argv[2]
    fifo_out, fifo_in = base + ".out", base + ".in"
    tmp = link + ".new"
    for p in (tmp, fifo_out, fifo_in):
        try:
            os.unlink(p)
        except FileNotFoundError:
            pass
    master, slave = os.openpty()
    # raw at once: no echo of the VM's output back into the VM, no line discipline, before
    # ipmi_sim sets its own termios on the same tty
    tty.setraw(slave)
    os.set_blocking(master, False)
    os.mkfifo(fifo_out, 0o600)
    os.mkfifo(fifo_in, 0o600)
    vm_out = os.open(fifo_out, os.O_RDWR | os.O_NONBLOCK)
    vm_in = os.open(fifo_in, os.O_RDWR | os.O_NONBLOCK)
    os.symlink(os.ttyname(slave), tmp)
    os.replace(tmp, link)  # the link last: it existing means the FIFOs are there too

    n = {"vm": 0, "vm_dropped": 0, "bmc": 0, "bmc_dropped": 0}
    t0 = time.time()

    def stop(_sig, _frm):
        log("stopping after %.0f s: VM->BMC %d bytes (%d dropped), BMC->VM %d bytes (%d dropped)"
            % (time.time() - t0, n["vm"], n["vm_dropped"], n["bmc"], n["bmc_dropped"]))
        for p in (link, fifo_out, fifo_in):
            try:
                os.unlink(p)
            except OSError:
                pass
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    log("pty %s (%s), FIFOs %s, %s" % (os.ttyname(slave), link, fifo_out, fifo_in))

    to_bmc = bytearray()  # printed by the VM, for the pty
    to_vm = bytearray()  # typed at the BMC, for the VM
    last_drop_log = 0.0

    def keep(buf, data, key):
        nonlocal last_drop_log
        room = CAP - len(buf)
        buf += data[:room]
        if len(data) > room:
            n[key] += len(data) - room
            if time.time() - last_drop_log >= 10:
                last_drop_log = time.time()
                log("dropping bytes (%s): %d so far" % (key, n[key]))

    while True:
        wl = ([master] if to_bmc else []) + ([vm_in] if to_vm else [])
        try:
            rr, ww, _ = select.select([vm_out, master], wl, [])
        except InterruptedError:
            continue
        if vm_out in rr:
            try:
                data = os.read(vm_out, 65536)
            except (BlockingIOError, InterruptedError):
                data = b""
            n["vm"] += len(data)
            keep(to_bmc, data, "vm_dropped")
        if master in rr:
            try:
                data = os.read(master, 65536)
            except (BlockingIOError, InterruptedError):
                data = b""
            except OSError:  # EIO: cannot happen while the relay holds the slave
                data = b""
                time.sleep(0.05)
            n["bmc"] += len(data)
            keep(to_vm, data, "bmc_dropped")
        for fd, buf in ((master, to_bmc), (vm_in, to_vm)):
            if buf and fd in ww:
                try:
                    del buf[: os.write(fd, buf)]
                except (BlockingIOError, InterruptedError):
                    pass


if __name__ == "__main__":
    sys.exit(main())
