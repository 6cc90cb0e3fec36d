#!/usr/bin/env python3
"""Event stream benchmark client (bench/events.sh): N streams on GET /v1/events/stream, then
events made by POST /v1/racks, one at a time at a steady rate (latency: each POST's answer to
its event on every stream), then a burst (throughput: until every stream has every event)."""
import http.client, json, sys, threading, time

addr, token, nstreams, nlat, nburst = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6])
host, port = addr.rsplit(":", 1)
seen = [dict() for _ in range(nstreams)]   # stream -> {rack name: monotonic time}
ready = threading.Barrier(nstreams + 1)

def reader(i):
    c = http.client.HTTPConnection(host, int(port))
    c.request("GET", "/v1/events/stream?action=rack.created", headers={"Authorization": "Bearer " + token})
    r = c.getresponse()
    assert r.status == 200, r.status
    r.readline(); r.readline()              # "retry: 2000" and its blank line: the stream is open
    ready.wait()
    for line in r:
        if line.startswith(b"data: "):
            ev = json.loads(line[6:])
            seen[i][ev["object"]["name"]] = time.monotonic()

for i in range(nstreams):
    threading.Thread(target=reader, args=(i,), daemon=True).start()
ready.wait()
api = http.client.HTTPConnection(host, int(port))
def post(name):
    api.request("POST", "/v1/racks", json.dumps({"name": name}),
                {"Authorization": "Bearer " + token, "Content-Type": "application/json"})
    r = api.getresponse(); r.read()
    assert r.status == 201, r.status
    return time.monotonic()

def wait_all(names, limit=60):
    end = time.monotonic() + limit
    while time.monotonic() < end:
        if all(n in s for s in seen for n in names):
            return True
        time.sleep(0.002)
    return False

lat = []
for k in range(nlat):
    name = "lat-%d" % k
    t0 = post(name)
    assert wait_all([name]), "event %s never arrived on every stream" % name
    lat += [s[name] - t0 for s in seen]
    time.sleep(0.05)
lat.sort()
pct = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))] * 1000
print("streams %d, %d events one at a time: latency POST answer -> event on a stream: "
      "p50 %.1f ms, p90 %.1f ms, p99 %.1f ms, max %.1f ms" % (nstreams, nlat, pct(.5), pct(.9), pct(.99), lat[-1] * 1000))
names = ["burst-%d" % k for k in range(nburst)]
t0 = time.monotonic()
for n in names:
    post(n)
t1 = time.monotonic()
assert wait_all(names), "the burst never arrived everywhere"
t2 = time.monotonic()
print("burst of %d events: posted in %.2f s (%.0f/s); on all %d streams %.2f s after the first post "
      "(%.0f event deliveries/s)" % (nburst, t1 - t0, nburst / (t1 - t0), nstreams, t2 - t0,
                                      nburst * nstreams / (t2 - t0)))
