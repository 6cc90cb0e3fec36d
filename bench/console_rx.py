#!/usr/bin/env python3
"""Console benchmark helper (bench/console.sh): drives the ipmi_sim BMCs' serial ports and
watches what rackpilotd makes of them. Python standard library only.

  console_rx.py burst --bytes N --logdir DIR [--tag T] [--probe SOLPROBE HOST:PORT SERIAL]
                      [--stall S] SERIAL=UUID ...
      Write N bytes of printable 100-byte lines into every SERIAL at once, as fast as each pty
      takes them, and poll DIR/UUID.log (rackpilotd's console log) until it holds the last
      line (given up after --stall S seconds without any progress, default 20). With --probe, tests/ipmi/solprobe.c (libipmiconsole, the same library rackpilotd
      uses) holds SOL on one more BMC and gets the same bytes at the same time: the peer
      baseline. Prints JSON: per session the write time, when the poll saw the last line, the
      log's own timestamps of the first and last line, lines found (every one checked), and
      for the probe the time its last byte came.

  console_rx.py latency --addr HOST:PORT --token TOKEN --duration S --rate R --bg-bps B
                        [--windows W --gap G] MARK_SERIAL=NODE ... -- BG_SERIAL ...
      One Server-Sent Events reader (GET /v1/nodes/NODE/console/stream) per marked node,
      timestamping each `data:` line on arrival; "MARK <ns>" lines (<ns>: the write's
      CLOCK_REALTIME) written to the marked serial ports at R lines/s each, B bytes/s of
      100-byte lines to every background port, for S seconds; W such windows G seconds apart
      (the streams stay open). Prints JSON: latencies (serial write -> SSE arrival, and split
      at the log line's own timestamp: write -> logged, logged -> SSE), lost marks.

  console_rx.py burst-stats FILE | latency-stats FILE
      The figures of a burst's or a latency run's JSON on one line (for the shell script).
"""
import calendar
import json
import math
import os
import re
import select
import signal
import socket
import subprocess
import sys
import time

LINE = 100


def now_ms():
    return time.time_ns() / 1e6


def iso_ms(ts):
    """'2026-12-06T14:37:48.231Z' -> epoch ms."""
    t = time.strptime(ts[:19], "%Y-%m-%dT%H:%M:%S")
    return calendar.timegm(t) * 1000 + int(ts[20:23])


def lines_for(tag, idx, nbytes):
    n = max(1, nbytes // LINE)
    out = []
    for k in range(n):
        head = "%s %02d L%06d " % (tag, idx, k)
        out.append(head + "x" * (LINE - 1 - len(head)) + "\n")
    return "".join(out).encode(), n


def pct(vals, p):
    """Nearest-rank percentile."""
    if not vals:
        return None
    s = sorted(vals)
    return s[max(0, min(len(s) - 1, math.ceil(p / 100.0 * len(s)) - 1))]


def burst(args):
    nbytes = 262144
    logdir = None
    tag = "B%d" % (os.getpid() % 100000)
    timeout = 600.0
    stall = 20.0
    probe = None
    targets = []
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--bytes":
            nbytes = int(args[i + 1]); i += 2
        elif a == "--logdir":
            logdir = args[i + 1]; i += 2
        elif a == "--tag":
            tag = args[i + 1]; i += 2
        elif a == "--timeout":
            timeout = float(args[i + 1]); i += 2
        elif a == "--stall":
            stall = float(args[i + 1]); i += 2
        elif a == "--probe":
            probe = (args[i + 1], args[i + 2], args[i + 3]); i += 4
        else:
            serial, uuid = a.split("=", 1)
            targets.append((serial, uuid)); i += 1

    sess = []
    for idx, (serial, uuid) in enumerate(targets):
        data, n = lines_for(tag, idx, nbytes)
        path = os.path.join(logdir, uuid + ".log")
        try:
            st = os.stat(path)
            off, ino = st.st_size, st.st_ino
        except OSError:
            off, ino = 0, None
        sess.append({"serial": serial, "uuid": uuid, "data": data, "sent": 0, "lines": n,
                     "log": path, "off": off, "ino": ino, "buf": b"", "found": 0, "bad": 0,
                     "first_log": None, "last_log": None, "seen": None, "wdone": None,
                     "pat": re.compile(("^(\\S+) %s %02d L(\\d{6}) " % (tag, idx)).encode())})

    # The peer: solprobe on one more BMC, up before anything is written.
    pr = None
    if probe:
        binpath, hostport, pserial = probe
        pdata, _ = lines_for(tag, 99, nbytes)
        pr = {"serial": pserial, "data": pdata, "sent": 0, "got": 0, "done": None,
              "wdone": None, "proc": subprocess.Popen(
                  [binpath, "-d", str(int(timeout) + 60), hostport, "admin", "password"],
                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, bufsize=0)}
        deadline = time.time() + 30
        line = b""
        while b"SOL established" not in line:
            line = pr["proc"].stdout.readline()
            if not line or time.time() > deadline:
                print("console_rx: solprobe did not get SOL: %r" % line, file=sys.stderr)
                sys.exit(1)
        os.set_blocking(pr["proc"].stdout.fileno(), False)
        pr["rbuf"] = b""

    def stop_probe(*_):
        if pr and pr["proc"].poll() is None:
            pr["proc"].terminate()
            pr["proc"].wait()
        sys.exit(143)
    signal.signal(signal.SIGTERM, stop_probe)
    signal.signal(signal.SIGINT, stop_probe)

    writers = []
    for s in sess:
        s["fd"] = os.open(s["serial"], os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY)
        writers.append(s)
    if pr:
        pr["fd"] = os.open(pr["serial"], os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY)
        writers.append(pr)

    t0 = now_ms()
    next_poll = t0
    pend = list(writers)
    progress, last_progress = None, t0
    stalled = False
    while True:
        t = now_ms()
        p = (sum(x["sent"] for x in writers), sum(x["found"] for x in sess),
             pr["got"] if pr else 0)
        if p != progress:
            progress, last_progress = p, t
        if t - last_progress > stall * 1000 or t - t0 > timeout * 1000:
            stalled = True
            print("console_rx: burst %s: no progress for %.0f s, given up" % (tag, stall),
                  file=sys.stderr)
            break
        rfds = [pr["proc"].stdout] if pr and pr["done"] is None else []
        wfds = [w["fd"] for w in pend]
        wait = max(0.0, (next_poll - t) / 1000.0)
        r, w, _ = select.select(rfds, wfds, [], min(wait, 0.01))
        byfd = {x["fd"]: x for x in pend}
        for fd in w:
            x = byfd[fd]
            try:
                k = os.write(fd, x["data"][x["sent"]:x["sent"] + 65536])
            except BlockingIOError:
                k = 0
            x["sent"] += k
            if x["sent"] >= len(x["data"]):
                x["wdone"] = now_ms()
                os.close(fd)
                pend.remove(x)
        if r:
            chunk = pr["proc"].stdout.read(1 << 20) or b""
            pr["rbuf"] += chunk
            *full, pr["rbuf"] = pr["rbuf"].split(b"\n")
            for l in full:
                m = re.match(rb"t=\d+ console output (\d+) bytes", l)
                if m:
                    pr["got"] += int(m.group(1))
            if pr["got"] >= len(pr["data"]):
                pr["done"] = now_ms()
        if now_ms() >= next_poll:
            next_poll = now_ms() + 20
            for s in sess:
                if s["seen"] is not None:
                    continue
                chunk = b""
                try:
                    ino = os.stat(s["log"]).st_ino
                except OSError:
                    ino = None
                if ino is not None and s["ino"] is not None and ino != s["ino"]:
                    # rolled over (at half of console_log_bytes): the rest is in UUID.log.1
                    try:
                        with open(s["log"] + ".1", "rb") as f:
                            f.seek(s["off"])
                            chunk = f.read()
                    except OSError:
                        pass
                    s["off"] = 0
                    s["rolled"] = s.get("rolled", 0) + 1
                if ino is not None:
                    s["ino"] = ino
                    try:
                        with open(s["log"], "rb") as f:
                            f.seek(s["off"])
                            more = f.read()
                    except OSError:
                        more = b""
                    s["off"] += len(more)
                    chunk += more
                s["buf"] += chunk
                *full, s["buf"] = s["buf"].split(b"\n")
                for l in full:
                    m = s["pat"].match(l)
                    if not m:
                        continue
                    k = int(m.group(2))
                    if k != s["found"]:
                        s["bad"] += 1
                    s["found"] = k + 1
                    ts = iso_ms(m.group(1).decode())
                    if s["first_log"] is None:
                        s["first_log"] = ts
                    s["last_log"] = ts
                    if k == s["lines"] - 1:
                        s["seen"] = now_ms()
        if not pend and all(s["seen"] is not None for s in sess) and \
                (pr is None or pr["done"] is not None):
            break
    if pr:
        try:
            with open("/proc/%d/stat" % pr["proc"].pid) as f:
                st = f.read().rsplit(")", 1)[1].split()
            pr["ticks"] = int(st[11]) + int(st[12])   # utime + stime, all its threads
        except OSError:
            pr["ticks"] = None
        pr["proc"].terminate()
        pr["proc"].wait()
    out = {"t0": t0, "bytes": nbytes, "line": LINE, "stalled": stalled, "sessions": []}
    for s in sess:
        out["sessions"].append({
            "uuid": s["uuid"], "lines": s["lines"], "found": s["found"], "out_of_order": s["bad"],
            "rolled_over": s.get("rolled", 0),
            "write_ms": None if s["wdone"] is None else round(s["wdone"] - t0, 1),
            "seen_ms": None if s["seen"] is None else round(s["seen"] - t0, 1),
            "first_log_ms": None if s["first_log"] is None else round(s["first_log"] - t0, 1),
            "last_log_ms": None if s["last_log"] is None else round(s["last_log"] - t0, 1)})
    if pr:
        out["probe"] = {"bytes": len(pr["data"]), "got": pr["got"],
                        "write_ms": None if pr["wdone"] is None else round(pr["wdone"] - t0, 1),
                        "done_ms": None if pr["done"] is None else round(pr["done"] - t0, 1),
                        "cpu_ticks": pr["ticks"]}
    json.dump(out, sys.stdout)
    print()


class Sse:
    """One GET .../console/stream, HTTP/1.1 chunked, read without blocking."""

    def __init__(self, addr, token, node):
        host, port = addr.rsplit(":", 1)
        self.node = node
        self.sock = socket.create_connection((host, int(port)))
        self.sock.sendall(("GET /v1/nodes/%s/console/stream HTTP/1.1\r\nHost: %s\r\n"
                           "Authorization: Bearer %s\r\nAccept: text/event-stream\r\n\r\n"
                           % (node, addr, token)).encode())
        self.raw = b""
        self.body = b""
        self.head = None
        self.chunked = False
        self.ready = False
        self.sock.setblocking(False)

    def feed(self, on_data):
        try:
            d = self.sock.recv(1 << 16)
        except BlockingIOError:
            return True
        if not d:
            return False
        t = time.time_ns()
        self.raw += d
        if self.head is None:
            if b"\r\n\r\n" not in self.raw:
                return True
            self.head, self.raw = self.raw.split(b"\r\n\r\n", 1)
            if not self.head.startswith(b"HTTP/1.1 200"):
                raise SystemExit("console_rx: stream of %s: %r" % (self.node, self.head[:200]))
            self.chunked = b"chunked" in self.head.lower()
        if self.chunked:
            while True:
                if b"\r\n" not in self.raw:
                    break
                size_s, rest = self.raw.split(b"\r\n", 1)
                size = int(size_s.split(b";")[0], 16)
                if len(rest) < size + 2:
                    break
                self.body += rest[:size]
                self.raw = rest[size + 2:]
        else:
            self.body += self.raw
            self.raw = b""
        *full, self.body = self.body.split(b"\n")
        for l in full:
            if l.startswith(b"retry:"):
                self.ready = True
            elif l.startswith(b"data: "):
                on_data(self.node, l[6:], t)
        return True


def latency(args):
    addr = token = None
    duration, rate, bg_bps, windows, gap = 30.0, 20.0, 2048, 1, 0.0
    marks, bgs = [], []
    opts = {"--addr", "--token", "--duration", "--rate", "--bg-bps", "--windows", "--gap"}
    i = 0
    rest = False
    while i < len(args):
        a = args[i]
        if rest:
            bgs.append(a); i += 1
        elif a == "--":
            rest = True; i += 1
        elif a in opts:
            v = args[i + 1]; i += 2
            if a == "--addr":
                addr = v
            elif a == "--token":
                token = v
            elif a == "--duration":
                duration = float(v)
            elif a == "--rate":
                rate = float(v)
            elif a == "--bg-bps":
                bg_bps = int(v)
            elif a == "--windows":
                windows = int(v)
            else:
                gap = float(v)
        else:
            serial, node = a.split("=", 1)
            marks.append((serial, node)); i += 1

    sent = {}   # ns -> node
    got = []    # (write ns, server-logged ms, arrival ns)
    seen = set()
    dup = [0]

    def on_data(node, text, t):
        m = re.match(rb"(\S+) MARK (\d+)$", text)
        if not m:
            return
        ns = int(m.group(2))
        if ns in seen:
            dup[0] += 1
            return
        seen.add(ns)
        got.append((ns, iso_ms(m.group(1).decode()), t))

    streams = [Sse(addr, token, node) for _, node in marks]
    deadline = time.time() + 15
    while not all(s.ready for s in streams):
        if time.time() > deadline:
            raise SystemExit("console_rx: the event streams did not open")
        r, _, _ = select.select([s.sock for s in streams], [], [], 0.1)
        for s in streams:
            if s.sock in r:
                s.feed(on_data)
    bymark = {s.sock: s for s in streams}

    def pump(until_ns):
        """Read the streams until until_ns."""
        while True:
            left = until_ns - time.time_ns()
            if left <= 0:
                return
            r, _, _ = select.select(list(bymark), [], [], min(left / 1e9, 0.05))
            for sk in r:
                if not bymark[sk].feed(on_data):
                    raise SystemExit("console_rx: a stream of %s ended" % bymark[sk].node)

    mfd = [(os.open(serial, os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY), node)
           for serial, node in marks]
    bfd = [os.open(serial, os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY) for serial in bgs]
    bgline = ("BG " + "y" * (LINE - 4) + "\n").encode()
    bg_per = max(1, int(round(bg_bps / LINE)))       # lines a second per background port
    step_m = int(1e9 / rate)
    step_b = int(1e9 / bg_per)
    short = [0]
    bg_bytes = [0]

    def wr(fd, b):
        try:
            k = os.write(fd, b)
        except BlockingIOError:
            k = 0
        if k < len(b):
            short[0] += 1
        return k

    for w in range(windows):
        if w:
            pump(time.time_ns() + int(gap * 1e9))
        start = time.time_ns()
        # staggered phases, so the writes spread over each period
        next_m = [start + k * step_m // max(1, len(mfd)) for k in range(len(mfd))]
        next_b = [start + k * step_b // max(1, len(bfd)) for k in range(len(bfd))]
        end = start + int(duration * 1e9)
        while True:
            t = time.time_ns()
            if t >= end:
                break
            for k, (fd, node) in enumerate(mfd):
                if t >= next_m[k]:
                    ns = time.time_ns()
                    if wr(fd, b"MARK %d\n" % ns):
                        sent[ns] = node
                    next_m[k] += step_m
            for k, fd in enumerate(bfd):
                if t >= next_b[k]:
                    bg_bytes[0] += wr(fd, bgline)
                    next_b[k] += step_b
            pump(min(next_m + next_b + [end]))
    # the last marks: up to 3 s more
    last = time.time_ns() + int(3e9)
    while len(seen) < len(sent) and time.time_ns() < last:
        pump(time.time_ns() + int(0.05e9))
    for fd, _ in mfd:
        os.close(fd)
    for fd in bfd:
        os.close(fd)
    for s in streams:
        s.sock.close()

    tot = [(a - w) / 1e6 for w, _, a in got]
    to_log = [(lg - w / 1e6) for w, lg, _ in got]
    from_log = [(a / 1e6 - lg) for _, lg, a in got]

    def summ(v):
        return {"p50": pct(v, 50), "p99": pct(v, 99), "max": max(v) if v else None,
                "mean": sum(v) / len(v) if v else None}
    secs = duration * windows
    json.dump({"sent": len(sent), "received": len(got), "lost": len(set(sent) - seen),
               "duplicates": dup[0], "short_writes": short[0], "nodes": len(mfd),
               "bg_ports": len(bfd), "seconds": secs, "windows": windows,
               "bg_bytes_per_s_per_port": bg_bytes[0] / secs / max(1, len(bfd)),
               "marks_per_s_per_node": len(sent) / secs / max(1, len(mfd)),
               "total_ms": summ(tot), "serial_to_log_ms": summ(to_log),
               "log_to_sse_ms": summ(from_log)}, sys.stdout)
    print()


def burst_stats(args):
    """One line: sessions complete lines_missing out_of_order median_Bps min_Bps max_Bps
    total_Bps last_ms probe_Bps probe_ms probe_cpu_ticks (bytes/s per session: its bytes over the time from
    the first write to its last line's log timestamp; total: all bytes over the last one)."""
    d = json.load(open(args[0]))
    rates, last, missing, ooo, done = [], 0.0, 0, 0, 0
    for s in d["sessions"]:
        missing += s["lines"] - s["found"]
        ooo += s["out_of_order"]
        if s["found"] == s["lines"] and s["last_log_ms"]:
            done += 1
            rates.append(s["lines"] * d["line"] / (max(s["last_log_ms"], 1.0) / 1000.0))
            last = max(last, s["last_log_ms"])
    tot = sum(s["lines"] for s in d["sessions"]) * d["line"]
    pr = d.get("probe")
    p_bps = p_ms = p_cpu = "-"
    if pr and pr["done_ms"]:
        p_ms = "%.0f" % pr["done_ms"]
        p_bps = "%.0f" % (pr["bytes"] / (pr["done_ms"] / 1000.0))
        p_cpu = pr.get("cpu_ticks", "-")
    print(len(d["sessions"]), done, missing, ooo,
          "%.0f" % (pct(rates, 50) or 0), "%.0f" % (min(rates) if rates else 0),
          "%.0f" % (max(rates) if rates else 0),
          "%.0f" % (tot / (last / 1000.0) if last else 0), "%.0f" % last, p_bps, p_ms, p_cpu)


def latency_stats(args):
    """One line: sent received lost p50 p99 max (total) p50 p99 (write->logged) p50 p99
    (logged->SSE) marks/s/node bg_B/s/port short_writes, ms with one decimal."""
    d = json.load(open(args[0]))
    f = lambda v: "-" if v is None else "%.1f" % v
    print(d["sent"], d["received"], d["lost"], f(d["total_ms"]["p50"]), f(d["total_ms"]["p99"]),
          f(d["total_ms"]["max"]), f(d["serial_to_log_ms"]["p50"]),
          f(d["serial_to_log_ms"]["p99"]), f(d["log_to_sse_ms"]["p50"]),
          f(d["log_to_sse_ms"]["p99"]), f(d["marks_per_s_per_node"]),
          "%.0f" % d["bg_bytes_per_s_per_port"], d["short_writes"])


if __name__ == "__main__":
    cmds = {"burst": burst, "latency": latency, "burst-stats": burst_stats,
            "latency-stats": latency_stats}
    if len(sys.argv) < 2 or sys.argv[1] not in cmds:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    cmds[sys.argv[1]](sys.argv[2:])
