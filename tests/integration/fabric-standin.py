#!/usr/bin/env python3
"""Stand-ins for the tools rack acceptance runs across nodes (tests/integration/test_fabric.c).

    fabric-standin.py TOOL NODE_DIR ARGS...

TOOL is ib_write_bw, ib_read_bw, iperf3, all_reduce_perf or nvidia-smi, called with the real
tool's arguments. Each behaves as the real one does on the wire where the check depends on it
(a server side listens on its TCP port and serves one client; all_reduce_perf's ranks meet at
NCCL_COMM_ID) and prints the real tool's output, from the fixtures in tests/fixtures/fabric/
(README.md there names their sources), with this node's figure in place of the fixture's.
NODE_DIR/standin.json says how the node behaves: {"addr": its address, "rates": {device:
Gb/s}, "eth_gbps": Gb/s, "hang": true (its server side never listens), "busbw": GB/s}.
"""
import json
import os
import socket
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
FIX = os.path.join(HERE, "..", "fixtures", "fabric")


def fixture(name):
    with open(os.path.join(FIX, name)) as f:
        return "".join(l for l in f if not l.startswith("== step"))


def opts(argv, flags):
    """The options that take a value, and the positional arguments."""
    got, pos, i = {}, [], 0
    while i < len(argv):
        a = argv[i]
        if a in flags and i + 1 < len(argv):
            got[a] = argv[i + 1]
            i += 2
            continue
        if not a.startswith("-"):
            pos.append(a)
        i += 1
    return got, pos


def serve(addr, port, mine):
    """One client: send our rate, take the pair's, return it."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port))
    s.listen(1)
    s.settimeout(120)
    c, _ = s.accept()
    c.sendall(("%f\n" % mine).encode())
    rate = float(c.makefile().readline() or mine)
    c.close()
    s.close()
    return rate


def connect(addr, port, mine):
    for _ in range(50):
        try:
            c = socket.create_connection((addr, port), timeout=10)
            break
        except OSError:
            time.sleep(0.1)
    else:
        return None
    theirs = float(c.makefile().readline())
    rate = min(mine, theirs)
    c.sendall(("%f\n" % rate).encode())
    c.close()
    return rate


def perftest(tool, cfg, argv):
    o, pos = opts(argv, {"-d", "-i", "-p", "-D", "-x", "-s"})
    dev, port = o.get("-d", "mlx5_0"), int(o.get("-p", "18515"))
    mine = float(cfg.get("rates", {}).get(dev, 392.41))
    if not pos:
        if cfg.get("hang"):
            time.sleep(600)  # never listens: the check's ready timeout ends it
            return 1
        rate = serve(cfg["addr"], port, mine)
    else:
        rate = connect(pos[-1], port, mine)
        if rate is None:
            print(" Couldn't connect to %s:%d" % (pos[-1], port))
            print("Unable to open file descriptor for socket connection Unable to init the socket connection")
            return 1
    text = fixture("ib_write_bw-gbits.txt").replace("Device         : mlx5_0", "Device         : " + dev)
    if tool == "ib_read_bw":
        text = text.replace("RDMA_Write BW Test", "RDMA_Read BW Test")
    print(text.replace("392.41", "%.2f" % rate), end="")
    return 0


def iperf3(cfg, argv):
    o, pos = opts(argv, {"-p", "-c", "-t"})
    port = int(o.get("-p", "5201"))
    mine = float(cfg.get("eth_gbps", 9.41))
    if "-s" in argv:
        serve(cfg["addr"], port, mine)
        return 0
    rate = connect(o["-c"], port, mine)
    if rate is None:
        print(fixture("iperf3-refused.txt"), end="")
        return 1
    text = fixture("iperf3-ok.txt")
    out = []
    for line in text.splitlines(True):
        if '"bits_per_second":' in line:
            head = line.split('"bits_per_second":')[0]
            line = '%s"bits_per_second":\t%.1f,\n' % (head, rate * 1e9)
        out.append(line)
    print("".join(out), end="")
    return 0


def nccl(cfg, argv):
    comm, rank, size = os.environ.get("NCCL_COMM_ID"), os.environ.get("RANK"), os.environ.get("WORLD_SIZE")
    if not comm or rank is None or size is None:
        print("stand-in all_reduce_perf: NCCL_COMM_ID, RANK and WORLD_SIZE must be set")
        return 2
    host, port = comm.rsplit(":", 1)
    if rank == "0":
        # The bootstrap: every other rank checks in before anything runs.
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((host, int(port)))
        s.listen(64)
        s.settimeout(60)
        for _ in range(int(size) - 1):
            c, _ = s.accept()
            c.close()
        s.close()
    else:
        if connect_plain(host, int(port)) is None:
            print("stand-in all_reduce_perf: rank %s cannot reach %s" % (rank, comm))
            return 1
    text = fixture("all_reduce_perf-2x8.txt")
    if "busbw" in cfg:
        text = text.replace("356.32", "%.2f" % float(cfg["busbw"]))
    print(text, end="")
    return 0


def connect_plain(host, port):
    for _ in range(100):
        try:
            c = socket.create_connection((host, port), timeout=5)
            c.close()
            return True
        except OSError:
            time.sleep(0.1)
    return None


def main():
    tool, node = sys.argv[1], sys.argv[2]
    argv = sys.argv[3:]
    with open(os.path.join(node, "standin.json")) as f:
        cfg = json.load(f)
    if tool in ("ib_write_bw", "ib_read_bw"):
        return perftest(tool, cfg, argv)
    if tool == "iperf3":
        return iperf3(cfg, argv)
    if tool == "all_reduce_perf":
        return nccl(cfg, argv)
    if tool == "nvidia-smi" and argv[:1] == ["-L"]:
        for i in range(8):
            print("GPU %d: NVIDIA H100 80GB HBM3 (UUID: GPU-5a1c0e42-0000-4000-8000-00000000000%d)" % (i, i))
        return 0
    print("stand-in %s: unsupported arguments %s" % (tool, argv))
    return 2


if __name__ == "__main__":
    sys.exit(main())
