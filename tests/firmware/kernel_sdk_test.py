"""The kernel SDK from a kernel developer's side: Ascend C kernels written outside the repository, compiled by
`npusim kernel FILE.cpp` or by their own CMake project with find_package(npusim) against an installed npusim, run on
the simulated chip and compared with NumPy. Bad kernels and bad arguments give clear errors, never a crash.

Environment: NPUSIM (the binary under test), NPUSIM_BUILD_DIR (its build tree, for `cmake --install`)."""
import json
import os
import pathlib
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

NPUSIM = os.environ["NPUSIM"]
BUILD_DIR = os.environ["NPUSIM_BUILD_DIR"]
SOURCE_DIR = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = SOURCE_DIR / "examples" / "kernels"
ADD = EXAMPLES / "add_double_buffer"


@pytest.fixture(scope="session", autouse=True)
def kernel_cache(tmp_path_factory):
    # A cache of this run's own, so that every test sees its compiles happen (or not) for itself.
    os.environ["NPUSIM_CACHE_DIR"] = str(tmp_path_factory.mktemp("kernel-cache"))


def sanitized_build():
    return "NPUSIM_SANITIZE:BOOL=ON" in pathlib.Path(BUILD_DIR, "CMakeCache.txt").read_text()


def npusim(*args, binary=NPUSIM, cwd=None):
    return subprocess.run([binary, *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=300)


def report(proc):
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def add_args(tmp, n_blocks=8, per_block=2048, tile_num=2, out_elems=None):
    rng = np.random.default_rng(7)
    x = rng.uniform(-4, 4, (n_blocks, per_block)).astype(np.float16)
    y = rng.uniform(-4, 4, (n_blocks, per_block)).astype(np.float16)
    np.save(tmp / "x.npy", x)
    np.save(tmp / "y.npy", y)
    np.save(tmp / "ref.npy", x + y)  # fp16 + fp16 rounds once to fp16 in NumPy, as the Vector unit does
    out = out_elems if out_elems is not None else n_blocks * per_block
    return ["--block-dim", n_blocks, "--arg", f"x={tmp / 'x.npy'}", "--arg", f"y={tmp / 'y.npy'}",
            "--arg", f"z=out:fp16:{out}", "--tiling", f"totalLength={n_blocks * per_block},tileNum={tile_num}",
            "--tiling-schema", ADD / "tiling.json"]


def test_source_kernel_matches_numpy_bit_for_bit(tmp_path):
    r = report(npusim("kernel", ADD / "add_custom.cpp", *add_args(tmp_path), "--check", tmp_path / "ref.npy",
                      "--atol", 0, "--rtol", 0, "--outputs", tmp_path / "out", "--json"))
    assert r["check"]["passed"] and r["check"]["max_abs_err"] == 0
    z = np.load(tmp_path / "out" / "z.npy")
    assert z.dtype == np.float16 and z.shape == (16384,)
    assert np.array_equal(z, np.load(tmp_path / "ref.npy").reshape(-1))
    assert r["kernel"]["name"] == "add_custom" and r["kernel"]["cores"] == 8
    assert [a["name"] for a in r["kernel"]["args"]] == ["x", "y", "z", "tiling"]


def test_double_buffering_is_faster_and_overlaps(tmp_path):
    # The same 8 KiB... 16 KiB tiles either way: one buffer per queue with twice the tiles, or two buffers.
    common = ["--block-dim", 8, "--arg", "x=random:fp16:8x131072", "--arg", "y=random:fp16:8x131072",
              "--arg", "z=out:fp16:8x131072", "--tiling-schema", ADD / "tiling.json", "--json"]
    one = report(npusim("kernel", ADD / "add_custom.cpp", "--cxxflags=-DBUFFER_NUM=1",
                        "--tiling", "totalLength=1048576,tileNum=16", *common))
    two = report(npusim("kernel", ADD / "add_custom.cpp", "--cxxflags=-DBUFFER_NUM=2",
                        "--tiling", "totalLength=1048576,tileNum=8", *common))
    assert one["kernel"]["cycles"] >= 1.5 * two["kernel"]["cycles"], (one["kernel"]["cycles"], two["kernel"]["cycles"])
    assert two["overlap"]["mte2_vector"] > 0.1
    assert one["overlap"]["mte2_vector"] == 0  # one buffer: the copy-in waits for the add that frees it


def test_compiles_once_and_again_when_an_included_file_changes(tmp_path):
    src = tmp_path / "kern"
    src.mkdir()
    (src / "params.h").write_text("#define SCALE 2.0f\n")
    (src / "scale.cpp").write_text(textwrap.dedent("""\
        #include "kernel_operator.h"
        #include "params.h"
        extern "C" __global__ __aicore__ void scale(GM_ADDR x, GM_ADDR y) {
          AscendC::GlobalTensor<float> gx, gy;
          gx.SetGlobalBuffer((__gm__ float*)x, 64);
          gy.SetGlobalBuffer((__gm__ float*)y, 64);
          AscendC::TPipe pipe;
          AscendC::TBuf<AscendC::TPosition::VECCALC> buf;
          pipe.InitBuffer(buf, 64 * sizeof(float));
          AscendC::LocalTensor<float> t = buf.Get<float>();
          AscendC::DataCopy(t, gx, 64);
          AscendC::SetFlag<AscendC::HardEvent::MTE2_V>(EVENT_ID0);
          AscendC::WaitFlag<AscendC::HardEvent::MTE2_V>(EVENT_ID0);
          AscendC::Muls(t, t, SCALE, 64);
          AscendC::SetFlag<AscendC::HardEvent::V_MTE3>(EVENT_ID0);
          AscendC::WaitFlag<AscendC::HardEvent::V_MTE3>(EVENT_ID0);
          AscendC::DataCopy(gy, t, 64);
        }
        """))
    x = np.arange(64, dtype=np.float32)
    np.save(tmp_path / "x.npy", x)
    for scale, compiles in [(2.0, True), (2.0, False), (3.0, True)]:
        (src / "params.h").write_text(f"#define SCALE {scale}f\n")
        np.save(tmp_path / "ref.npy", x * scale)
        p = npusim("kernel", src / "scale.cpp", "--arg", f"x={tmp_path / 'x.npy'}", "--arg", "y=out:fp32:64",
                   "--check", tmp_path / "ref.npy", "--json")
        r = report(p)
        assert r["check"]["passed"], scale
        assert ("npusim: compiling" in p.stderr) == compiles, (scale, p.stderr)


def test_outside_project_with_find_package_builds_and_runs(tmp_path):
    prefix = tmp_path / "prefix"
    subprocess.run(["cmake", "--install", BUILD_DIR, "--prefix", prefix], check=True, capture_output=True)
    for f in ["bin/npusim", "include/npusim/firmware/kernel/sdk/kernel_operator.h",
              "lib/cmake/npusim/npusimConfig.cmake", "lib/pkgconfig/npusim.pc"]:
        assert (prefix / f).exists(), f
    project = tmp_path / "my_kernel"
    shutil.copytree(ADD, project)
    build = project / "build"
    for cmd in (["cmake", "-S", project, "-B", build, f"-DCMAKE_PREFIX_PATH={prefix}"], ["cmake", "--build", build]):
        p = subprocess.run(list(map(str, cmd)), capture_output=True, text=True)
        assert p.returncode == 0, p.stdout + p.stderr
    lib = build / "libadd_custom.so"
    r = report(npusim("kernel", lib, "--entry", "add_custom", *add_args(tmp_path), "--check", tmp_path / "ref.npy",
                      "--json", binary=prefix / "bin" / "npusim"))
    assert r["check"]["passed"]
    # The installed binary compiles a source against the installed headers.
    p = npusim("kernel", project / "add_custom.cpp", *add_args(tmp_path), "--check", tmp_path / "ref.npy", "--json",
               binary=prefix / "bin" / "npusim")
    assert report(p)["check"]["passed"]
    deps = "".join(f.read_text() for f in pathlib.Path(os.environ["NPUSIM_CACHE_DIR"]).glob("kernels/*.deps"))
    assert str(prefix / "include" / "npusim" / "firmware" / "kernel" / "sdk" / "kernel_operator.h") in deps
    # The host program (Ascend-sample style, acl/acl.h) with the kernel compiled in, linked with npusim::runtime.
    env = {**os.environ, "NPUSIM_JSON": str(tmp_path / "host.json"), "NPUSIM_TRACE": str(tmp_path / "host_trace.json")}
    p = subprocess.run([build / "add_host"], capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0 and "0 of 16384 elements wrong" in p.stdout, p.stdout + p.stderr
    host = json.loads((tmp_path / "host.json").read_text())
    assert [t["name"] for t in host["tasks"] if t["type"] == "kernel"] == ["add_custom"]
    # The same kernel, config and tiling through `npusim kernel`: the same cycles.
    assert host["kernel"]["cycles"] == r["kernel"]["cycles"]
    assert json.loads((tmp_path / "host_trace.json").read_text())["traceEvents"]
    # A host program's mistakes come back as ACL error codes with a message, never a crash.
    (project / "bad_host.cpp").write_text(BAD_HOST)
    with open(project / "CMakeLists.txt", "a") as f:
        f.write("add_executable(bad_host bad_host.cpp add_custom.cpp)\ntarget_link_libraries(bad_host PRIVATE npusim::runtime)\n")
    for cmd in (["cmake", "-S", project, "-B", build], ["cmake", "--build", build, "--target", "bad_host"]):
        q = subprocess.run(list(map(str, cmd)), capture_output=True, text=True)
        assert q.returncode == 0, q.stdout + q.stderr
    # Under the sanitizers, an exception on the main thread after a core's error stopped the SystemC coroutines
    # trips ASan's stack bookkeeping (Debian's SystemC is not annotated for it; see scripts/test.sh): the kernel
    # error part runs in the normal suite only.
    sanitized = sanitized_build()
    p = subprocess.run([build / "bad_host"], capture_output=True, text=True, timeout=120,
                       env={**os.environ, **({"SKIP_KERNEL_ERROR": "1"} if sanitized else {})})
    assert p.returncode == 0, p.stdout + p.stderr
    lines = dict(l.split(": ", 1) for l in p.stdout.splitlines())
    assert lines["memcpy past destMax"] == "100000" and "exceeds destMax" in p.stderr
    assert lines["memcpy to host memory as device"] == "500003" and "is not device memory" in p.stderr
    assert lines["free of a host pointer"] == "500003"
    if not sanitized:
        assert lines["kernel past its buffers"] == "500003" and "outside every tensor launched with the kernel" in p.stderr
        assert lines["after the device stopped"] == "500003" and "the device stopped" in p.stderr
    # pkg-config gives the flags for a build without CMake.
    pc = subprocess.run(["pkg-config", "--cflags", "npusim"], capture_output=True, text=True,
                        env={**os.environ, "PKG_CONFIG_PATH": str(prefix / "lib" / "pkgconfig")})
    assert pc.returncode == 0 and "kernel/sdk" in pc.stdout


BAD_HOST = textwrap.dedent("""\
    #include <cstdio>
    #include <cstdlib>
    #include "acl/acl.h"
    #include "kernel_operator.h"
    extern "C" __global__ __aicore__ void add_custom(GM_ADDR x, GM_ADDR y, GM_ADDR z, GM_ADDR tiling);
    struct AddTiling { uint32_t totalLength, tileNum; };
    int main() {
      aclInit(nullptr);
      aclrtSetDevice(0);
      uint8_t *x, *y, *z, *t;
      aclrtMalloc((void**)&x, 4096, ACL_MEM_MALLOC_HUGE_FIRST);
      aclrtMalloc((void**)&y, 4096, ACL_MEM_MALLOC_HUGE_FIRST);
      aclrtMalloc((void**)&z, 4096, ACL_MEM_MALLOC_HUGE_FIRST);
      aclrtMalloc((void**)&t, sizeof(AddTiling), ACL_MEM_MALLOC_HUGE_FIRST);
      char host[8192] = {};
      std::printf("memcpy past destMax: %d\\n", aclrtMemcpy(x, 4096, host, 8192, ACL_MEMCPY_HOST_TO_DEVICE));
      std::printf("memcpy to host memory as device: %d\\n", aclrtMemcpy(host + 4096, 4096, host, 64, ACL_MEMCPY_HOST_TO_DEVICE));
      std::printf("free of a host pointer: %d\\n", aclrtFree(host));
      if (std::getenv("SKIP_KERNEL_ERROR")) return 0;
      const AddTiling tiling{1u << 20, 64};  // tiles of 16 KiB from 4 KiB buffers
      aclrtMemcpy(t, sizeof tiling, &tiling, sizeof tiling, ACL_MEMCPY_HOST_TO_DEVICE);
      aclError e = ACLRT_LAUNCH_KERNEL(add_custom)(1, nullptr, x, y, z, t);
      if (e == ACL_SUCCESS) e = aclrtSynchronizeDevice();
      std::printf("kernel past its buffers: %d\\n", e);
      std::printf("after the device stopped: %d\\n", aclrtMemcpy(x, 4096, host, 64, ACL_MEMCPY_HOST_TO_DEVICE));
      aclrtResetDevice(0);
      aclFinalize();
      return 0;
    }
    """)


def expect_error(proc, *needles):
    assert proc.returncode == 1, (proc.returncode, proc.stdout, proc.stderr)
    for n in needles:
        assert n in proc.stderr, (n, proc.stderr)
    assert "Warning" not in proc.stdout and proc.stdout == ""


def test_compile_error_shows_the_compilers_message_with_the_users_line(tmp_path):
    bad = tmp_path / "bad.cpp"
    bad.write_text((ADD / "add_custom.cpp").read_text().replace("AscendC::Add(zLocal,", "AscendC::Add(zLocl,"))
    line = next(i + 1 for i, l in enumerate(bad.read_text().splitlines()) if "zLocl" in l)
    expect_error(npusim("kernel", bad, *add_args(tmp_path)), f"bad.cpp:{line}:", "zLocl", "does not compile")


def test_a_call_the_sdk_lacks_is_a_compile_error_naming_it(tmp_path):
    k = tmp_path / "sin.cpp"
    k.write_text(textwrap.dedent("""\
        #include "kernel_operator.h"
        extern "C" __global__ __aicore__ void k(GM_ADDR x) {
          AscendC::TPipe pipe;
          AscendC::TBuf<AscendC::TPosition::VECCALC> b;
          pipe.InitBuffer(b, 256);
          AscendC::LocalTensor<half> t = b.Get<half>();
          AscendC::Sin(t, t, 128);
        }
        """))
    expect_error(npusim("kernel", k, "--arg", "x=zeros:fp16:128"), "AscendC::Sin is not in the npusim kernel SDK")


def test_missing_entry_wrong_arguments_and_libraries_without_a_table(tmp_path):
    expect_error(npusim("kernel", ADD / "add_custom.cpp", "--entry", "add"), "no __global__ function 'add'",
                 "add_custom")
    expect_error(npusim("kernel", ADD / "add_custom.cpp", "--arg", "x=random:fp16:16", "--arg", "y=random:fp16:16"),
                 "takes 4 argument(s)", "2 given (x, y)")
    expect_error(npusim("kernel", ADD / "add_custom.cpp", "--arg", "x=5", "--arg", "y=random:fp16:16",
                        "--arg", "z=out:fp16:16", "--tiling", "totalLength=16,tileNum=1", "--tiling-schema",
                        ADD / "tiling.json"), "--arg x", "is a number; the parameter takes a tensor")
    expect_error(npusim("kernel", ADD / "add_custom.cpp", *add_args(tmp_path)[:-4], "--tiling", "totalLength=16",
                        "--tiling-schema", ADD / "tiling.json"), "no value for tiling field 'tileNum'")
    expect_error(npusim("kernel", ADD / "add_custom.cpp", *add_args(tmp_path)[:-4],
                        "--tiling", "totalLength=-1,tileNum=1", "--tiling-schema", ADD / "tiling.json"),
                 "'totalLength' (uint32_t): -1 is out of range")
    expect_error(npusim("kernel", ADD / "add_custom.cpp", *add_args(tmp_path)[:-4],
                        "--tiling", "totalLength=16,tileNum=1,tileLen=4", "--tiling-schema", ADD / "tiling.json"),
                 "'tileLen' is not a field")
    src = tmp_path / "plain.cpp"
    src.write_text('extern "C" void plain(void*) {}\n')
    subprocess.run(["c++", "-shared", "-fPIC", src, "-o", tmp_path / "libplain.so"], check=True)
    expect_error(npusim("kernel", tmp_path / "libplain.so"), "no npusim entry table")
    (tmp_path / "junk.so").write_text("not a library")
    expect_error(npusim("kernel", tmp_path / "junk.so"), "cannot load the kernel library")
    expect_error(npusim("kernel", tmp_path / "none.cpp"), "none.cpp: no such file")


def test_a_too_small_output_and_an_out_of_bounds_read_name_the_instruction_and_tensors(tmp_path):
    # The output holds half of what the kernel writes: the first copy past its end is the error.
    expect_error(npusim("kernel", ADD / "add_custom.cpp", *add_args(tmp_path, out_elems=8192)),
                 "DataCopy", "add_custom.cpp:", "outside every tensor launched with the kernel", "z [")
    k = tmp_path / "oob.cpp"
    k.write_text(textwrap.dedent("""\
        #include "kernel_operator.h"
        extern "C" __global__ __aicore__ void oob(GM_ADDR x, GM_ADDR y) {
          AscendC::GlobalTensor<half> gx, gy;
          gx.SetGlobalBuffer((__gm__ half*)x, 256);
          gy.SetGlobalBuffer((__gm__ half*)y, 256);
          AscendC::TPipe pipe;
          AscendC::TQue<AscendC::TPosition::VECIN, 1> q;
          pipe.InitBuffer(q, 1, 1024);
          AscendC::LocalTensor<half> t = q.AllocTensor<half>();
          AscendC::DataCopy(t, gx[4096], 256);  // far past the end of x (and of y)
          q.EnQue(t);
          t = q.DeQue<half>();
          q.FreeTensor(t);
        }
        """))
    expect_error(npusim("kernel", k, "--arg", "x=zeros:fp16:256", "--arg", "y=out:fp16:256"),
                 "oob.cpp:10", "outside every tensor launched with the kernel", "x [0, 512)")


SOFTMAX = EXAMPLES / "softmax"


@pytest.mark.parametrize("rows,cols,blocks", [(64, 1024, 8), (8, 4000, 4), (3, 16, 1)])
def test_softmax_example_matches_numpy(tmp_path, rows, cols, blocks):
    # Row lengths with a partial last repeat (4000 = 62 x 64 + 32 fp32 lanes) and a single partial one (16).
    x = np.random.default_rng(cols).uniform(-6, 6, (rows, cols)).astype(np.float16)
    xf = x.astype(np.float32)
    e = np.exp(xf - xf.max(axis=1, keepdims=True))
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "ref.npy", (e / e.sum(axis=1, keepdims=True)).astype(np.float16))
    r = report(npusim("kernel", SOFTMAX / "softmax_custom.cpp", "--block-dim", blocks, "--arg", f"x={tmp_path / 'x.npy'}",
                      "--arg", f"y=out:fp16:{rows}x{cols}", "--tiling", f"rows={rows},cols={cols}",
                      "--tiling-schema", SOFTMAX / "tiling.json", "--check", tmp_path / "ref.npy", "--json"))
    assert r["check"]["passed"], r["check"]
    assert r["kernel"]["pipes"]["vector"] > 0 and r["kernel"]["pipes"]["scalar"] > 0


REDUCE_KERNEL = textwrap.dedent("""\
    #include "kernel_operator.h"
    using T = ELEM;
    // sum, max and min of `count` values at y[0], y[8], y[16]; `count` is a scalar kernel parameter.
    extern "C" __global__ __aicore__ void reduce3(GM_ADDR x, GM_ADDR y, uint32_t count) {
      AscendC::GlobalTensor<T> gx, gy;
      gx.SetGlobalBuffer((__gm__ T*)x, count);
      gy.SetGlobalBuffer((__gm__ T*)y, 48);
      AscendC::TPipe pipe;
      AscendC::TBuf<AscendC::TPosition::VECCALC> in, work, out;
      pipe.InitBuffer(in, count * sizeof(T));
      pipe.InitBuffer(work, count * sizeof(T));
      pipe.InitBuffer(out, 48 * sizeof(T));
      AscendC::LocalTensor<T> a = in.Get<T>(), w = work.Get<T>(), o = out.Get<T>();
      AscendC::DataCopy(a, gx, count);
      AscendC::SetFlag<AscendC::HardEvent::MTE2_V>(EVENT_ID0);
      AscendC::WaitFlag<AscendC::HardEvent::MTE2_V>(EVENT_ID0);
      AscendC::Duplicate(o, (T)0, 48);
      AscendC::ReduceSum(o, a, w, count);
      AscendC::PipeBarrier<PIPE_V>();
      AscendC::ReduceMax(o[16], a, w, count);
      AscendC::PipeBarrier<PIPE_V>();
      AscendC::ReduceMin(o[32], a, w, count);
      AscendC::SetFlag<AscendC::HardEvent::V_MTE3>(EVENT_ID0);
      AscendC::WaitFlag<AscendC::HardEvent::V_MTE3>(EVENT_ID0);
      AscendC::DataCopy(gy, o, 48);
    }
    """)


@pytest.mark.parametrize("dtype,count", [("fp32", 8), ("fp32", 64), ("fp32", 4168), ("fp32", 16392),
                                         ("fp16", 38416), ("fp16", 272)])
def test_level2_reductions_match_numpy(tmp_path, dtype, count):
    # Counts past 255 full repeats (fp32 16392 = 256 x 64 + 8) and with partial repeats on every pass.
    np_t = np.float32 if dtype == "fp32" else np.float16
    src = tmp_path / "reduce3.cpp"
    src.write_text(REDUCE_KERNEL)
    x = np.random.default_rng(count).uniform(-1, 1, count).astype(np_t)
    np.save(tmp_path / "x.npy", x)
    r = report(npusim("kernel", src, f"--cxxflags=-DELEM={'float' if dtype == 'fp32' else 'half'}",
                      "--arg", f"x={tmp_path / 'x.npy'}", "--arg", f"y=out:{dtype}:48", "--arg", f"count={count}",
                      "--outputs", tmp_path, "--json"))
    y = np.load(tmp_path / "y.npy").astype(np.float64)
    xf = x.astype(np.float64)
    # Sums round per partial sum in the element type: a bound of count x half an ulp of the largest partial sum.
    ulp = np.finfo(np_t).eps * max(1.0, np.abs(xf).sum())
    assert abs(y[0] - xf.sum()) <= ulp * np.log2(count) + 1e-6, (y[0], xf.sum())
    assert y[16] == xf.max() and y[32] == xf.min()
    assert r["kernel"]["args"][2] == {"name": "count", "spec": str(count)}


# --- --sanitize --------------------------------------------------------------------------------------------------

RACY = EXAMPLES / "racy_add" / "racy_add.cpp"


def line_of(path, text):
    return next(i + 1 for i, l in enumerate(pathlib.Path(path).read_text().splitlines()) if text in l)


def test_sanitize_reports_the_racy_example_with_both_source_lines():
    args = ["--arg", "x=random:fp32:4096", "--arg", "y=random:fp32:4096", "--arg", "z=out:fp32:4096", "--arg", "n=4096"]
    assert npusim("kernel", RACY, *args).returncode == 0  # the race does not show without the checker
    p = npusim("kernel", RACY, *args, "--sanitize", "--json")
    add, copy = line_of(RACY, "AscendC::Add("), line_of(RACY, "AscendC::DataCopy(zGm")
    expect_error(p, "read-after-write race on UB", f"MTE3 DataCopy at racy_add.cpp:{copy}",
                 f"V Add at racy_add.cpp:{add}", "HardEvent::V_MTE3")


def test_sanitize_reports_a_queue_buffer_never_freed_and_a_deadlock_names_pipe_flag_and_line(tmp_path):
    body = textwrap.dedent("""\
        #include "kernel_operator.h"
        extern "C" __global__ __aicore__ void k(GM_ADDR x) {
          AscendC::GlobalTensor<half> gx;
          gx.SetGlobalBuffer((__gm__ half*)x, 256);
          AscendC::TPipe pipe;
          AscendC::TQue<AscendC::TPosition::VECIN, 1> q;
          pipe.InitBuffer(q, 1, 512);
          AscendC::LocalTensor<half> t = q.AllocTensor<half>();
          AscendC::DataCopy(t, gx, 256);
          ENQUE
          t = q.DeQue<half>();
          AscendC::Abs(t, t, 256);
          FREE
        }
        """)
    leak = tmp_path / "leak.cpp"
    leak.write_text(body.replace("ENQUE", "q.EnQue(t);").replace("FREE", ""))
    expect_error(npusim("kernel", leak, "--arg", "x=zeros:fp16:256", "--sanitize"),
                 "taken by AllocTensor at leak.cpp:8 is never given back by FreeTensor")
    assert npusim("kernel", leak, "--arg", "x=zeros:fp16:256").returncode == 0
    dead = tmp_path / "dead.cpp"
    dead.write_text(body.replace("ENQUE", "// no EnQue").replace("FREE", "q.FreeTensor(t);"))
    expect_error(npusim("kernel", dead, "--arg", "x=zeros:fp16:256"), "deadlock on core aiv0 (block 0)",
                 "pipe V waits at wait_flag(MTE2->V, id 0) (dead.cpp:11)")


@pytest.mark.parametrize("cmd", [
    ["kernel", ADD / "add_custom.cpp", "--block-dim", 8, "--arg", "x=random:fp16:8x16384", "--arg", "y=random:fp16:8x16384",
     "--arg", "z=out:fp16:8x16384", "--tiling", "totalLength=131072,tileNum=8", "--tiling-schema", ADD / "tiling.json"],
    ["kernel", SOFTMAX / "softmax_custom.cpp", "--block-dim", 4, "--arg", "x=random:fp16:8x4000",
     "--arg", "y=out:fp16:8x4000", "--tiling", "rows=8,cols=4000", "--tiling-schema", SOFTMAX / "tiling.json"],
    ["kernel", EXAMPLES / "matmul_cube" / "matmul_custom.cpp", "--type", "cube", "--block-dim", 2,
     "--arg", "a=random:fp16:128x256", "--arg", "b=random:fp16:256x256", "--arg", "c=out:fp16:128x256",
     "--tiling", "M=128,N=256,K=256,baseM=128,baseN=128,baseK=64", "--tiling-schema", EXAMPLES / "matmul_cube" / "tiling.json"],
    *[["kernel", EXAMPLES / "fa_tiles" / "fa_tiles.cpp", "--entry", entry, "--type", kind, *args, "--arg", "tiling=tiling",
       "--tiling", "repeat=2", "--tiling-schema", EXAMPLES / "fa_tiles" / "tiling.json"]
      for entry, kind, args in [
          ("fa_qk", "cube", ["--arg", "q=random:fp16:128x128", "--arg", "k=random:fp16:256x128", "--arg", "s=out:fp32:128x256"]),
          ("fa_softmax", "vector", ["--arg", "s=random:fp32:64x256", "--arg", "p=out:fp16:64x256"]),
          ("fa_pv", "cube", ["--arg", "p=random:fp16:128x256", "--arg", "v=random:fp16:256x128", "--arg", "o=out:fp32:128x128"]),
          ("fa_update", "vector", ["--arg", "pv=random:fp32:64x128"])]],
    ["kernel", EXAMPLES / "fa_tiles" / "fa_tiles.cpp", "--entry", "fa_sync", "--type", "mix", "--arg", "tiling=tiling",
     "--tiling", "repeat=3", "--tiling-schema", EXAMPLES / "fa_tiles" / "tiling.json"],
    ["kernel", "vector_add"], ["kernel", "matmul_tile"], ["kernel", "pipeline_demo"],
    ["op", "softmax", "-p", "shape=64x4096"], ["op", "layernorm", "-p", "shape=8x40000"],
    ["op", "rope", "-p", "shape=2x128x128"], ["op", "add", "-p", "shape=1024x1000", "-p", "shape_b=1000"],
    ["op", "matmul", "-p", "M=300", "-p", "N=200", "-p", "K=77", "-p", "bias=1", "-p", "act=gelu"],
    ["op", "flash_attention", "-p", "B=1", "-p", "N=4", "-p", "KVN=2", "-p", "S=500", "-p", "D=64", "-p", "causal=1"],
    ["op", "flash_attention", "-p", "B=1", "-p", "N=2", "-p", "S=256", "-p", "D=128", "--config", "310p"],
])
def test_sanitize_passes_the_examples_samples_and_library_ops_silently(cmd):
    # Functional too: the checker must not change values (--check passes).
    extra = ["--check"] if cmd[0] == "op" or cmd[1] in ("vector_add", "matmul_tile") else []
    r = report(npusim(*cmd, "--sanitize", *extra, "--json"))
    if extra:
        assert r["check"]["passed"]


MATMUL = EXAMPLES / "matmul_cube"
MIX = EXAMPLES / "matmul_relu_mix"


def matmul_case(tmp_path, M, N, K):
    rng = np.random.default_rng(M + N + K)
    a = rng.uniform(-1, 1, (M, K)).astype(np.float16)
    b = rng.uniform(-1, 1, (K, N)).astype(np.float16)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    return a.astype(np.float64) @ b.astype(np.float64)  # fp16 inputs, exact products and sums


@pytest.mark.parametrize("config", ["910b", "310p"])
def test_matmul_cube_example_matches_numpy(tmp_path, config):
    M, N, K, bm, bn, bk = 256, 384, 512, 128, 128, 64
    ref = matmul_case(tmp_path, M, N, K)
    np.save(tmp_path / "ref.npy", ref.astype(np.float16))
    r = report(npusim("kernel", MATMUL / "matmul_custom.cpp", "--config", config, "--type", "cube",
                      "--block-dim", (M // bm) * (N // bn), "--arg", f"a={tmp_path / 'a.npy'}", "--arg",
                      f"b={tmp_path / 'b.npy'}", "--arg", f"c=out:fp16:{M}x{N}",
                      "--tiling", f"M={M},N={N},K={K},baseM={bm},baseN={bn},baseK={bk}",
                      "--tiling-schema", MATMUL / "tiling.json", "--check", tmp_path / "ref.npy", "--json"))
    # fp16 output: one rounding of a value up to ~20 in magnitude (the default fp16 tolerance covers it).
    assert r["check"]["passed"], r["check"]
    assert r["kernel"]["pipes"]["cube"] > 0 and r["overlap"]["mte2_cube"] > 0.5  # copies under the Mmads


def test_mix_example_matches_numpy_on_cube_and_vector_cores(tmp_path):
    M, N, K, bm, bn, bk = 256, 256, 256, 128, 128, 64
    ref = np.maximum(matmul_case(tmp_path, M, N, K), 0)
    np.save(tmp_path / "ref.npy", ref.astype(np.float16))
    args = ["--type", "mix", "--block-dim", 4, "--arg", f"a={tmp_path / 'a.npy'}", "--arg", f"b={tmp_path / 'b.npy'}",
            "--arg", f"c=out:fp16:{M}x{N}", "--arg", f"ws=zeros:fp16:{M}x{N}",
            "--tiling", f"M={M},N={N},K={K},baseM={bm},baseN={bn},baseK={bk}", "--tiling-schema", MIX / "tiling.json"]
    r = report(npusim("kernel", MIX / "matmul_relu_custom.cpp", *args, "--check", f"c={tmp_path / 'ref.npy'}",
                      "--sanitize", "--json"))
    assert r["check"]["passed"], r["check"]
    assert r["kernel"]["cores"] == 12  # 4 blocks of 1 AIC + 2 AIV
    assert r["kernel"]["pipes"]["cube"] > 0 and r["kernel"]["pipes"]["vector"] > 0
    # On a coupled chip there are no cross-core flags: a clear error naming the call and line. (Under the
    # sanitizers this error path trips ASan's stack bookkeeping of Debian's unannotated SystemC coroutines, as the
    # host program's device error does: checked in the normal suite.)
    if not sanitized_build():
        expect_error(npusim("kernel", MIX / "matmul_relu_custom.cpp", "--config", "310p", *args),
                     "CrossCoreWaitFlag(id 1) at matmul_relu_custom.cpp:", "need a split chip")


# Every library op, small enough to be quick, in functional mode under the checker.
EVERY_OP = [
    *[[op, "-p", "shape=64x4096"] for op in ["add", "sub", "mul", "div", "relu", "gelu", "gelu_tanh", "silu", "exp",
                                              "log", "sqrt", "abs", "neg", "reciprocal", "sigmoid", "tanh", "erf",
                                              "softmax", "log_softmax", "layernorm", "add_layernorm", "rmsnorm",
                                              "reduce_sum", "reduce_mean", "reduce_max"]],
    ["softmax", "-p", "shape=8x40000"], ["layernorm", "-p", "shape=8x40000"], ["reduce_sum", "-p", "shape=64x512", "-p", "axis=0"],
    ["swiglu", "-p", "shape=64x8192"], ["rope", "-p", "shape=2x128x128"], ["rope_interleaved", "-p", "shape=2x128x128"],
    ["cast", "-p", "shape=64x4096", "-p", "to=fp32"], ["transpose", "-p", "shape=512x768"],
    ["slice", "-p", "shape=64x4096", "-p", "starts=0,16", "-p", "ends=64,4000", "-p", "steps=1,2"],
    ["concat", "-p", "shapes=64x128,64x256", "-p", "axis=1"], ["split", "-p", "shape=64x384", "-p", "axis=1", "-p", "sizes=128,256"],
    ["expand", "-p", "shape=1x4096", "-p", "to=64x4096"], ["fused_elementwise", "-p", "expr=mul(silu(x0),x1)", "-p", "shape=64x4096"],
    ["matmul", "-p", "M=256", "-p", "N=256", "-p", "K=256", "-p", "B=2", "-p", "trans_b=1"],
    ["flash_attention", "-p", "B=1", "-p", "N=2", "-p", "S=256", "-p", "D=128", "-p", "causal=1"],
]


@pytest.mark.parametrize("config", ["910b", "310p"])
def test_sanitize_passes_every_library_op(config):
    for op in EVERY_OP:
        p = npusim("op", *op, "--config", config, "--sanitize", "--check")
        assert p.returncode == 0, (config, op, p.stderr)


def test_tiling_read_by_getvalue_steers_the_kernel_in_timing_only_mode_too(tmp_path):
    # The tiling struct holds its values in every mode, so the timed scalar read (GlobalTensor::GetValue) sees them.
    k = tmp_path / "loops.cpp"
    k.write_text(textwrap.dedent("""\
        #include "kernel_operator.h"
        extern "C" __global__ __aicore__ void loops(GM_ADDR x, GM_ADDR tiling) {
          AscendC::GlobalTensor<uint32_t> t;
          t.SetGlobalBuffer((__gm__ uint32_t*)tiling, 1);
          const uint32_t n = t.GetValue(0);
          AscendC::TPipe pipe;
          AscendC::TBuf<AscendC::TPosition::VECCALC> b;
          pipe.InitBuffer(b, 4096);
          AscendC::LocalTensor<half> v = b.Get<half>();
          for (uint32_t i = 0; i < n; i++) AscendC::Abs(v, v, 2048);
        }
        """))
    (tmp_path / "schema.json").write_text('{"fields": [{"name": "n", "type": "uint32"}]}')
    instrs = {}
    for n in (1, 2, 5):
        r = report(npusim("kernel", k, "--arg", "x=zeros:fp16:16", "--tiling", f"n={n}", "--tiling-schema",
                          tmp_path / "schema.json", "--json"))
        assert r["sim"]["mode"] == "timing"
        instrs[n] = r["sim"]["instructions"]
    # The same instructions per loop iteration (zeros read back would run no iteration at all).
    assert instrs[2] > instrs[1] and instrs[5] - instrs[1] == 4 * (instrs[2] - instrs[1])


def test_an_unknown_sample_name_lists_every_sample_and_the_file_form():
    p = npusim("kernel", "no_such_kernel")
    expect_error(p, "no sample kernel named 'no_such_kernel'", "pipeline_demo", "vector_add", "a .cpp or .so path")


FA_TILES = EXAMPLES / "fa_tiles"


def fa_tile_check(tmp_path, entry, kind, inputs, out, ref, rtol=2e-3):
    """Runs one tile of examples/kernels/fa_tiles once in functional mode against a NumPy reference."""
    args = []
    for name, value in inputs.items():
        np.save(tmp_path / f"{name}.npy", value)
        args += ["--arg", f"{name}={tmp_path / f'{name}.npy'}"]
    np.save(tmp_path / "ref.npy", ref)
    args += ["--arg", out, "--arg", "tiling=tiling"]
    r = report(npusim("kernel", FA_TILES / "fa_tiles.cpp", "--entry", entry, "--type", kind, *args,
                      "--tiling", "repeat=1", "--tiling-schema", FA_TILES / "tiling.json", "--rtol", rtol,
                      "--check", tmp_path / "ref.npy", "--json"))
    assert r["check"]["passed"], (entry, r["check"])


def test_fa_tiles_compute_their_tiles(tmp_path):
    # The microbenchmarks behind docs/calibration.md's FlashAttention tiles do the tiles' arithmetic: S = Q K^T and
    # PV = P V in fp32 from fp16, and one online-softmax step (running max starting at 0) into fp16 P.
    rng = np.random.default_rng(19)
    f16 = lambda *shape: rng.uniform(-1, 1, shape).astype(np.float16)  # noqa: E731
    q, k, p, v = f16(128, 128), f16(256, 128), f16(128, 256), f16(256, 128)
    fa_tile_check(tmp_path, "fa_qk", "cube", {"q": q, "k": k}, "s=out:fp32:128x256",
                  (q.astype(np.float64) @ k.astype(np.float64).T).astype(np.float32))
    fa_tile_check(tmp_path, "fa_pv", "cube", {"p": p, "v": v}, "o=out:fp32:128x128",
                  (p.astype(np.float64) @ v.astype(np.float64)).astype(np.float32))
    s = rng.uniform(-8, 8, (64, 256)).astype(np.float32)
    scaled = s.astype(np.float64) / np.sqrt(128)
    m = np.maximum(scaled.max(axis=1, keepdims=True), 0)
    fa_tile_check(tmp_path, "fa_softmax", "vector", {"s": s}, "p=out:fp16:64x256",
                  np.exp(scaled - m).astype(np.float16), rtol=4e-3)


def test_fa_tiles_report_per_tile_cycles_whose_serial_stages_add_up_and_the_control_costs():
    # run.py: one tile's latency from two repeat counts. Each tile's stages are serialised by flags (copy in ->
    # L1 -> L0 -> Cube -> FixPipe, or copy in -> Vector -> copy out), so its latency is the sum of its pipes' busy
    # cycles, to a cycle or two of flag hand-over each; the Cube's share is exact: 8 x 16 x 8 fractals of
    # 16 x 16 x 16 at one a cycle plus cube.latency (16 on 910b).
    p = subprocess.run([sys.executable, FA_TILES / "run.py", NPUSIM, "--repeat", "3",
                        "--json"], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    tiles = out["tiles"]
    assert set(tiles) == {"qk", "softmax", "pv", "update"}
    for name, t in tiles.items():
        stages = sum(t["busy"].values())
        assert stages <= t["cycles"] <= stages + 4, (name, t)
    assert tiles["qk"]["busy"]["cube"] == 8 * 16 * 8 + 16
    assert tiles["pv"]["busy"]["cube"] == 8 * 8 * 16 + 16
    # The control costs from the launch path's config (910b, 1.8 GHz): a block wave costs launch.dispatch +
    # core_startup + kernel_init = 150 + 50 + 1000 ns; an empty kernel's task adds the 500 ns completion report. A
    # cross-core flag has no latency in the model (a simplification docs/calibration.md lists): a round trip is a
    # few cycles of issue.
    control = out["control"]
    assert abs(control["block_dispatch"]["cycles"] - 1.2e-6 * 1.8e9) <= 2, control
    assert abs(control["kernel_launch"]["cycles"] - 1.7e-6 * 1.8e9) <= 2, control
    assert 0 <= control["sync"]["cycles"] < 10, control


def test_int64_and_bool_arrays_are_refused_as_kernel_arguments_and_references(tmp_path):
    """.npy files of int64 and bool (which `npusim run` converts for models) are not kernel arguments: reading their
    bytes as another type would be silently wrong."""
    args = add_args(tmp_path)
    np.save(tmp_path / "ids.npy", np.arange(16384, dtype=np.int64))
    np.save(tmp_path / "mask.npy", np.ones(16384, dtype=bool))
    bad = [a if not str(a).startswith("x=") else f"x={tmp_path / 'ids.npy'}" for a in args]
    expect_error(npusim("kernel", ADD / "add_custom.cpp", *bad), "ids.npy' holds int64 values; kernel arguments are")
    expect_error(npusim("kernel", ADD / "add_custom.cpp", *args, "--check", tmp_path / "mask.npy"),
                 "mask.npy holds bool values; references are")
