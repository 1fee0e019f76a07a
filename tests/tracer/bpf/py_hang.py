# A Python program that hangs where the test knows (bpf.stacks-python): the
# main thread in time.sleep inside nested functions, a second thread
# blocked on a lock. Line numbers are checked by run_bpf_test.sh: keep the
# marked lines where they are. Writes its pid to argv[1] when both wait.
import os
import sys
import threading
import time

lock = threading.Lock()
lock.acquire()


def blocked_worker():
    lock.acquire()  # LINE 15: the worker waits here


def wait_here():
    time.sleep(600)  # LINE 19: the main thread sleeps here


def outer():
    wait_here()  # LINE 23


def main():
    t = threading.Thread(target=blocked_worker, name="blocked")
    t.start()
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as f:
            f.write("%d\n" % os.getpid())
    outer()  # LINE 32


main()  # LINE 35
