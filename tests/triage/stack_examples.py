"""Stack dumps as people paste them (py-spy, faulthandler, gdb), shared by the CLI's tests and the
site's parity test (tests/site/test_triage_page.py). Frames follow the real tools' formats."""

EXAMPLES = {
    # two ranks' py-spy dumps: one in all_reduce, one in broadcast (different code paths)
    "pyspy_two_ranks_mismatch": """\
Process 1201: python train.py --local-rank=0
Python v3.11.7 (/usr/bin/python3.11)

Thread 1201 (idle): "MainThread"
    all_reduce (torch/distributed/distributed_c10d.py:2050)
    wrapper (torch/distributed/c10d_logger.py:72)
    train_step (train.py:88)
    <module> (train.py:120)
Thread 1250 (idle): "Thread-1 (_pin_memory_loop)"
    select (selectors.py:415)
    _bootstrap (threading.py:995)

Process 1202: python train.py --local-rank=1
Python v3.11.7 (/usr/bin/python3.11)

Thread 1202 (idle): "MainThread"
    broadcast (torch/distributed/distributed_c10d.py:1910)
    wrapper (torch/distributed/c10d_logger.py:72)
    sync_params (train.py:61)
    <module> (train.py:118)
""",
    # py-spy dumps of eight ranks grouped by their stacks, each group under a line of the
    # person's own: no `Process N:` header, two MainThreads (DeepSpeed ZeRO-3, frames as py-spy prints them)
    "pyspy_grouped_no_header": """\
3 processes in:
Thread 33550 (active): "MainThread"
    all_reduce (torch/distributed/distributed_c10d.py:2924)
    wrapper (torch/distributed/c10d_logger.py:81)
    all_reduce (deepspeed/comm/torch.py:170)
    step (deepspeed/runtime/zero/stage3.py:2120)

5 processes in:
Thread 33549 (active): "MainThread"
    reduce_scatter_tensor (torch/distributed/distributed_c10d.py:4450)
    wrapper (torch/distributed/c10d_logger.py:81)
    reduce_scatter_tensor (deepspeed/comm/torch.py:290)
    reduce_scatter_coalesced (deepspeed/runtime/comm/coalesced_collectives.py:205)
""",
    # faulthandler: the current thread is the one that dumped; the main thread waits in a barrier
    "faulthandler_barrier": """\
Current thread 0x00007ff3363ff700 (most recent call first):
  File "/opt/app/watch.py", line 31 in _dump_loop
  File "/usr/lib/python3.10/threading.py", line 953 in run
  File "/usr/lib/python3.10/threading.py", line 1016 in _bootstrap_inner
  File "/usr/lib/python3.10/threading.py", line 973 in _bootstrap

Thread 0x00007ff406132180 (most recent call first):
  File "/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py", line 3685 in barrier
  File "/opt/app/train.py", line 40 in main
  File "/opt/app/train.py", line 52 in <module>
""",
    # a rank that never left init_process_group: the TCPStore waits for its peers
    "pyspy_rendezvous": """\
Thread 3301 (idle): "MainThread"
    _create_c10d_store (torch/distributed/rendezvous.py:189)
    _env_rendezvous_handler (torch/distributed/rendezvous.py:264)
    init_process_group (torch/distributed/distributed_c10d.py:1520)
    main (train.py:14)
""",
    # a DataLoader worker asleep on a lock it inherited at fork
    "pyspy_worker_lock": """\
Thread 4410 (idle): "MainThread"
    acquire (logging/__init__.py:917)
    handle (logging/__init__.py:1028)
    emit_log (dataset.py:77)
    __getitem__ (dataset.py:52)
    fetch (torch/utils/data/_utils/fetch.py:52)
    _worker_loop (torch/utils/data/_utils/worker.py:308)
    run (multiprocessing/process.py:108)
""",
    # gdb: c10d waits on a collective's Work in C++ (no Python frame names it)
    "gdb_c10d_wait": """\
Thread 1 (Thread 0x7f695c9b1740 (LWP 88123)):
#0  0x00007f6961a8d7a9 in syscall () from /lib/x86_64-linux-gnu/libc.so.6
#1  0x00007f6920a33e07 in c10d::ProcessGroupNCCL::WorkNCCL::wait(std::chrono::duration<long, \
std::ratio<1l, 1000l> >) () from /opt/torch/lib/libtorch_cuda.so
#2  0x00007f695a1d9b2f in pybind11::cpp_function::dispatcher(_object*, _object*, _object*) () \
from /opt/torch/lib/libtorch_python.so
""",
    # idle in a C extension no rule names: a guess, said as one
    "pyspy_idle_unnamed": """\
Thread 6120 (idle): "MainThread"
    _run_graph (my_ext/runtime.py:88)
    step (train.py:51)
    <module> (train.py:90)
""",
    # the main thread computes: a dump that names no wait (no conclusion, but says where)
    "pyspy_running": """\
Thread 5120 (active+gil): "MainThread"
    forward (model.py:210)
    _call_impl (torch/nn/modules/module.py:1527)
    train_step (train.py:88)
""",
    # vLLM's engine core waits for its workers' answers (frames as in vllm#50835's py-spy dump);
    # its worker waits on the same queue for the next request, which is no hang of its own
    "pyspy_vllm_engine_waits_for_workers": """\
Process 4085279: VLLM::EngineCore
Python v3.12.13 (/usr/bin/python3.12)

Thread 4085279 (idle): "MainThread"
    poll (zmq/sugar/poll.py:106)
    poll (zmq/sugar/socket.py:1062)
    recv (vllm/distributed/device_communicators/shm_broadcast.py:802)
    dequeue (vllm/distributed/device_communicators/shm_broadcast.py:794)
    get_response (vllm/v1/executor/multiproc_executor.py:387)
    _wait_for_response (vllm/v1/executor/multiproc_executor.py:95)
    result (vllm/v1/executor/multiproc_executor.py:90)
""",
    "pyspy_vllm_worker_idle": """\
Process 4085301: VllmWorker-0
Python v3.12.13 (/usr/bin/python3.12)

Thread 4085301 (idle): "MainThread"
    acquire_read (vllm/distributed/device_communicators/shm_broadcast.py:548)
    dequeue (vllm/distributed/device_communicators/shm_broadcast.py:790)
    worker_busy_loop (vllm/v1/executor/multiproc_executor.py:651)
    worker_main (vllm/v1/executor/multiproc_executor.py:610)
""",
    # py-spy --native of a thread blocked in a kernel launch: the stream's queue is full because a
    # kernel on the GPU does not finish (py-spy names unresolved native frames by their address)
    "pyspy_native_kernel_launch": """\
Thread 3301 (active): "MainThread"
    0x7f2a11c6309a (libcuda.so.1)
    0x7f2a11a25db6 (libcuda.so.1)
    cuLaunchKernel (libcuda.so.1)
    0x7f2a3c81376d (libcudart.so.12)
    cudaLaunchKernel (libcudart.so.12)
    void my_ext::topk_kernel<float> (my_ext.so)
    topk (my_ext.so)
""",
    # the same launch under a collective's Python frame: the collective says more
    "pyspy_native_launch_under_all_reduce": """\
Thread 3302 (active): "MainThread"
    cuLaunchKernel (libcuda.so.1)
    ncclLaunchKernel (libnccl.so.2)
    all_reduce (torch/distributed/distributed_c10d.py:2501)
    train_step (train.py:91)
""",
    # a training loop with no DataLoader workers decoding a video sample itself
    "pyspy_decord_decode": """\
Thread 7710 (active): "MainThread"
    __call__ (decord/_ffi/_ctypes/function.py:173)
    get_batch (decord/video_reader.py:175)
    load_clip (dataset.py:58)
    __getitem__ (dataset.py:31)
    train (train.py:140)
""",
}
