#!/usr/bin/env python3
"""console-ts.py IN OUT - follow a VM's serial console file and time-stamp its lines.

QEMU writes the console (a file chardev, appended across power cycles) unbuffered; this polls
it every 20 ms and appends "<epoch seconds> <line>" to OUT for every complete line, with
carriage returns and ANSI escapes removed. The stamps are when a line was seen (at most ~20 ms
late), which lets e2e.sh measure boot phases against host-side events (power on, API calls).
Runs until killed (e2e.sh records its pid; rack.sh down stops it).
"""
import os
import re
import sys
import time

ANSI = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]|\x1bc|\r")


def main():
    src, dst = sys.argv[1], sys.argv[2]
    buf = b""
    pos = 0
    with open(dst, "ab", buffering=0) as out:
        while True:
            try:
                with open(src, "rb") as f:
                    size = os.fstat(f.fileno()).st_size
                    if size < pos:  # truncated: start over
                        pos, buf = 0, b""
                    f.seek(pos)
                    chunk = f.read()
            except FileNotFoundError:
                chunk = b""
            if chunk:
                pos += len(chunk)
                buf += chunk
                now = time.time()
                lines = buf.split(b"\n")
                buf = lines.pop()
                out.write(b"".join(b"%.3f %s\n" % (now, ANSI.sub(b"", l)) for l in lines))
            time.sleep(0.02)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        pass
