#!/usr/bin/env python3
"""Helpers of bench/sensors.sh for the Redfish mock fleet (standard library only).

  sensors_rf.py read PORT_BASE COUNT [--expand] [--user U --password P]
      "A plain sequential Redfish read", what a naive script does: for each BMC in turn, over
      one keep-alive connection with Basic auth, GET /redfish/v1/Systems, its first member, each
      chassis in the system's Links.Chassis, the chassis' Sensors collection and each member of
      it (--expand: the collection with $expand=.($levels=1) instead of the members one by one).
      Prints "bmcs_ok bmcs_failed sensors_with_reading requests".
  sensors_rf.py state PORT_BASE COUNT
      Sums the mock's counters over the fleet (GET /__mock/state of each BMC; the control API is
      not counted in them): prints "requests logins sessions".
"""
import base64
import http.client
import json
import sys


def read(port_base, count, expand, user, password):
    auth = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
    hdrs = {"Authorization": auth, "Accept": "application/json"}
    ok = failed = sensors = requests = 0
    for i in range(count):
        conn = http.client.HTTPConnection("127.0.0.1", port_base + i, timeout=30)

        def get(path):
            nonlocal requests
            requests += 1
            conn.request("GET", path, headers=hdrs)
            r = conn.getresponse()
            body = r.read()
            if r.status != 200:
                raise RuntimeError(f"GET {path}: {r.status}")
            return json.loads(body)

        try:
            systems = get("/redfish/v1/Systems")
            system = get(systems["Members"][0]["@odata.id"])
            n = 0
            for link in system.get("Links", {}).get("Chassis", []):
                chassis = get(link["@odata.id"])
                if "Sensors" not in chassis:
                    continue
                coll_uri = chassis["Sensors"]["@odata.id"]
                if expand:
                    coll = get(coll_uri + "?%24expand=.(%24levels%3D1)")
                    members = coll.get("Members", [])
                else:
                    coll = get(coll_uri)
                    members = [get(m["@odata.id"]) for m in coll.get("Members", [])]
                n += sum(1 for m in members if m.get("Reading") is not None)
            sensors += n
            ok += 1
        except (OSError, RuntimeError, KeyError, IndexError, ValueError,
                http.client.HTTPException) as e:
            print(f"sensors_rf: BMC {port_base + i}: {e}", file=sys.stderr)
            failed += 1
        finally:
            conn.close()
    print(ok, failed, sensors, requests)


def state(port_base, count):
    tot = {"requests": 0, "logins": 0, "sessions": 0}
    for i in range(count):
        conn = http.client.HTTPConnection("127.0.0.1", port_base + i, timeout=30)
        try:
            conn.request("GET", "/__mock/state")
            s = json.loads(conn.getresponse().read())
            for k in tot:
                tot[k] += int(s.get(k, 0))
        finally:
            conn.close()
    print(tot["requests"], tot["logins"], tot["sessions"])


def main(argv):
    if len(argv) < 4 or argv[1] not in ("read", "state"):
        sys.exit(__doc__)
    port_base, count = int(argv[2]), int(argv[3])
    if argv[1] == "state":
        return state(port_base, count)
    opts = argv[4:]
    user = opts[opts.index("--user") + 1] if "--user" in opts else "admin"
    password = opts[opts.index("--password") + 1] if "--password" in opts else "secret"
    read(port_base, count, "--expand" in opts, user, password)


if __name__ == "__main__":
    main(sys.argv)
