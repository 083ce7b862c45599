"""Closed-loop client for langgraph dev: C threads, each creates a thread then POST runs/wait; prints runs/s, p50/p99, server CPU/run.

Usage: python lgclient.py URL CONCURRENCY SECONDS SERVER_PID (httpx needed)."""
import json, sys, threading, time, httpx, os
url, c, secs, pid = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
inp = json.load(open(__file__.rsplit("/", 1)[0] + "/input.json"))
def ticks():
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return int(f[11]) + int(f[12])
lat = []; lock = threading.Lock()
def one(cl):
    t = cl.post(url + "/threads", json={}).json()["thread_id"]
    t0 = time.perf_counter()
    r = cl.post(f"{url}/threads/{t}/runs/wait", json={"assistant_id": "research", "input": inp}, timeout=120)
    r.raise_for_status(); assert r.json().get("status") == "ok", r.text[:200]
    return time.perf_counter() - t0
with httpx.Client() as cl:
    for _ in range(2): one(cl)
end = time.perf_counter() + secs
def worker():
    with httpx.Client(timeout=120) as cl:
        while time.perf_counter() < end:
            d = one(cl)
            with lock: lat.append(d)
k0 = ticks(); t0 = time.perf_counter()
ts = [threading.Thread(target=worker) for _ in range(c)]
[t.start() for t in ts]; [t.join() for t in ts]
el = time.perf_counter() - t0; k1 = ticks()
lat.sort(); n = len(lat)
print(json.dumps({"label": "langgraph dev", "concurrency": c, "runs": n, "runs_per_s": round(n/el, 1),
  "p50_ms": round(lat[n//2]*1000, 1), "p99_ms": round(lat[min(n-1, int(n*0.99))]*1000, 1),
  "server_cpu_ms_per_run": round((k1-k0)/os.sysconf("SC_CLK_TCK")*1000/n, 2)}))
