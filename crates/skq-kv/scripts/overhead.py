#!/usr/bin/env python3
# Bytes of overhead per item: stores 100 000 items (10-byte keys, 32-byte values) with
# pymemcache, then reads `stats`. Usage: overhead.py PORT (a memcached or skq-kv server).
import sys
from pymemcache.client.base import Client
port=int(sys.argv[1]); n=100000
c = Client(("127.0.0.1", port), default_noreply=True, timeout=60)
c.flush_all(noreply=False)
keys=["key:%06d"%i for i in range(n)]  # 10-byte keys
val=b"v"*32
for i in range(0,n,1000):
    c.set_many({k: val for k in keys[i:i+1000]}, noreply=True)
c.version()
st=c.stats()
items=st[b"curr_items"]; by=st[b"bytes"]
payload=10+32
extra = ""
if b"hash_bytes" in st:
    extra=" hash_bytes/item=%.1f" % (st[b"hash_bytes"]/items)
if b"skq_overhead_per_item" in st:
    extra=" skq_overhead_per_item=%s" % st[b"skq_overhead_per_item"]
print("port %d items=%d bytes=%d bytes/item=%.1f header/item=%.1f%s" % (port, items, by, by/items, by/items-payload, extra))
