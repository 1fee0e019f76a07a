# A 2-rank gloo job where rank 1 never joins the all-reduce (bpf.stacks-python):
# rank 0 hangs in dist.all_reduce inside reduce_grads (line 18), rank 1 in
# time.sleep (line 20). RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT come
# from the environment; argv[1]: each rank writes its pid into argv[1].RANK.
import os
import sys
import time

import torch
import torch.distributed as dist


def reduce_grads(t):
    rank = dist.get_rank()
    with open("%s.%d" % (sys.argv[1], rank), "w") as f:
        f.write("%d\n" % os.getpid())
    if rank == 0:
        dist.all_reduce(t)  # LINE 18: rank 0 waits for rank 1 here
    else:
        time.sleep(600)  # LINE 20: rank 1 went elsewhere


dist.init_process_group("gloo", timeout=__import__("datetime").timedelta(seconds=120))
reduce_grads(torch.ones(8))  # LINE 24
