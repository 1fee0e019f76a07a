# --events --json: the fields of every record kind, with the values the
# fixture wrote (tft_sample's README describes it).
source "$(dirname "$0")/lib.sh" "$@"

"$SAMPLE" "$tmp/f.trace" --ranks 2 --steps 4 >/dev/null
"$TFDUMP" --events --json "$tmp/f.trace" >"$tmp/ev.jsonl"
pycheck '
ev = [json.loads(l) for l in open(sys.argv[1])]
for e in ev:
    for k in ("rank", "seq", "step", "kind", "ts", "name"):
        assert k in e, (k, e)
def one(**kw):
    got = [e for e in ev if all(e.get(k) == v for k, v in kw.items())]
    assert len(got) == 1, (kw, len(got))
    return got[0]
HEX16 = re.compile("[0-9a-f]{16}")

t = one(rank=0, step=2, kind="tensor", name="L0.qkv")
assert t["dtype"] == "f32" and t["shape"] == [4, 64, 768] and t["mode"] == "full", t
assert isinstance(t["id"], int) and isinstance(t["seq"], int) and t["device"] == "cpu"
full = {"numel", "nan", "pinf", "ninf", "zero", "min", "max", "fingerprint",
        "mean", "std", "l1", "l2", "absmax", "over_fp16", "over_bf16", "under_fp16"}
assert set(t["stats"]) == full, sorted(t["stats"])
s = t["stats"]
assert s["numel"] == 4 * 64 * 768 and s["nan"] == 0 and s["min"] <= s["mean"] <= s["max"]
assert HEX16.fullmatch(s["fingerprint"]), s["fingerprint"]

tok = one(rank=1, step=0, kind="tensor", name="tokens")
assert tok["mode"] == "health" and tok["dtype"] == "i32"
assert set(tok["stats"]) == {"numel", "nan", "pinf", "ninf", "zero", "min", "max", "fingerprint"}
mask = one(rank=0, step=1, kind="tensor", name="L1.attn.mask")
assert mask["mode"] == "shape" and mask["stats"] == {"numel": 64 * 64} and mask["dtype"] == "bool"
loss = one(rank=0, step=3, kind="tensor", name="loss")
assert loss["shape"] == [] and loss["stats"]["numel"] == 1

# data parallel: parameters and reduced gradients equal across ranks, activations not
fp = lambda r, n: one(rank=r, step=1, kind="tensor", name=n)["stats"]["fingerprint"]
assert fp(0, "grad.flat") == fp(1, "grad.flat") and fp(0, "param.wte") == fp(1, "param.wte")
assert fp(0, "emb") != fp(1, "emb")

o = one(rank=0, step=2, kind="op", seq=t["seq"])
assert o["name"] == "matmul" and o["op_kind"] == "gemm" and o["scope"] == "L0/attn", o
assert o["outputs"] == [t["id"]] and len(o["inputs"]) == 1 and len(o["attrs"]) == 6, o

cs = [e for e in ev if e["kind"] == "collective"]
assert len(cs) == 16
for c in cs:
    for k in ("comm", "coll_seq", "type", "count", "dtype", "op", "root", "comm_rank",
              "nranks", "t_enter", "t_exit", "phase", "result"):
        assert k in c, (k, c)
    assert c["type"] == "allreduce" and c["op"] == "sum" and c["nranks"] == 2
    assert c["coll_seq"] == c["step"] and c["comm_rank"] == c["rank"]
    assert HEX16.fullmatch(c["comm"]) and c["name"] == "MPI_Allreduce"
assert len({c["comm"] for c in cs}) == 1
enter = one(rank=1, step=2, kind="collective", phase="enter")
done = one(rank=1, step=2, kind="collective", phase="exit")
assert enter["t_exit"] == 0 and enter["result"] is None and enter["seq"] == done["seq"], enter
assert done["t_exit"] > done["t_enter"] == enter["t_enter"], done
res = done["result"]
assert one(rank=1, step=2, kind="tensor", id=res)["name"] == "grad.flat"

a = one(rank=1, step=3, kind="alloc")
f = one(rank=1, step=3, kind="free")
assert a["site"] == "activations" == a["name"] and a["ptr"] == f["ptr"] and a["bytes"] == f["bytes"] > 0
assert re.fullmatch("0x[0-9a-f]+", a["ptr"])

st = [e for e in ev if e["kind"] == "step" and e["rank"] == 0]
assert [(e["step"], e["phase"]) for e in st] == [(s, p) for s in range(4) for p in ("begin", "end")]

k = one(rank=0, step=0, kind="kernel")
assert k["name"] == "sgemm_128x64_nn" and k["grid"] == [5, 2, 1] and k["block"] == [256, 1, 1]
assert k["end"] > k["start"] and k["device"] == "cuda:0" and k["op_kind"] == "kernel"

ck = one(rank=1, kind="checkpoint")
assert ck["step"] == 2 and ck["action"] == "save" and ck["path"] == "ckpt/step-000002.bin" == ck["name"]

p0 = one(rank=0, kind="process", event="start")
px = one(rank=0, kind="process", event="exit")
assert p0["pid"] == px["pid"] > 0 and px["code"] == 0 and px["signal"] is None and p0["code"] is None
' "$tmp/ev.jsonl"
echo PASS
