#include "stack/runtime/pipeline_demo.hpp"

#include "common/util/error.hpp"
#include "firmware/kernel/kernel_api.hpp"

namespace npusim::stack::runtime {

using namespace fw::kernel;

namespace {
// y = 2x + 1 over `n` floats, split over the blocks, in tiles that fit the UB.
std::function<void()> twice_plus_one(std::uint64_t x, std::uint64_t y, std::uint64_t n) {
  return [=] {
    const std::uint64_t per = n / GetBlockNum(), base = GetBlockIdx() * per;
    const std::uint64_t tile = std::min<std::uint64_t>(per, 4096);
    TPipe pipe;
    TQue<TPosition::VECIN, 2> qi;
    TQue<TPosition::VECOUT, 2> qo;
    pipe.InitBuffer(qi, 2, tile * 4);
    pipe.InitBuffer(qo, 2, tile * 4);
    GlobalTensor<float> gx, gy;
    for (std::uint64_t off = 0; off < per; off += tile) {
      const std::uint64_t len = std::min(tile, per - off);
      gx.SetGlobalBuffer(x + (base + off) * 4);
      gy.SetGlobalBuffer(y + (base + off) * 4);
      LocalTensor<float> a = qi.AllocTensor<float>();
      DataCopy(a, gx, len);
      qi.EnQue(a);
      a = qi.DeQue<float>();
      LocalTensor<float> b = qo.AllocTensor<float>();
      Muls(b, a, 2.0f, len);
      Adds(b, b, 1.0f, len);
      qo.EnQue(b);
      qi.FreeTensor(a);
      b = qo.DeQue<float>();
      DataCopy(gy, b, len);
      qo.FreeTensor(b);
    }
  };
}
}  // namespace

void validate(const PipelineDemo& demo) {
  if (demo.streams == 0 || demo.chunks == 0) throw InputError("pipeline_demo: streams and chunks must be at least 1");
  if (demo.bytes == 0 || demo.bytes % 1024 != 0) throw InputError("pipeline_demo: bytes must be a positive multiple of 1 KiB");
}

void run_pipeline_demo(Device& dev, PipelineDemo& demo) {
  validate(demo);
  const std::uint64_t n = demo.bytes / 4, total = n * demo.chunks;
  if (demo.input.empty()) {
    demo.input.resize(total);
    for (std::uint64_t i = 0; i < total; ++i) demo.input[i] = static_cast<float>(i % 1000) * 0.5f;
  }
  demo.output.assign(total, 0.0f);
  // As many blocks as there are vector cores, each with a whole number of 32 B blocks of the chunk.
  auto blocks = static_cast<std::uint32_t>(
      std::min<std::uint64_t>(dev.chip().config().vector_units(), std::max<std::uint64_t>(1, n / 1024)));
  while (n % (8ULL * blocks) != 0) --blocks;
  std::vector<Stream> streams;
  std::vector<std::uint64_t> in_buf, out_buf;
  for (std::uint32_t s = 0; s < demo.streams; ++s) {
    streams.push_back(dev.create_stream());
    in_buf.push_back(dev.malloc(demo.bytes));
    out_buf.push_back(dev.malloc(demo.bytes));
  }
  // Each stream reuses its two buffers for its chunks: stream order keeps chunk k+S behind chunk k.
  std::vector<Event> done;
  for (std::uint32_t c = 0; c < demo.chunks; ++c) {
    const std::uint32_t s = c % demo.streams;
    dev.memcpy_async(in_buf[s], demo.input.data() + c * n, demo.bytes, streams[s]);
    dev.launch("twice_plus_one", KernelType::kVector, blocks, twice_plus_one(in_buf[s], out_buf[s], n), streams[s]);
    dev.memcpy_async(demo.output.data() + c * n, out_buf[s], demo.bytes, streams[s]);
  }
  for (std::uint32_t s = 0; s < demo.streams; ++s) {
    done.push_back(dev.create_event());
    dev.record(done.back(), streams[s]);
  }
  for (const Event& e : done) dev.synchronize(e);
}

}  // namespace npusim::stack::runtime
