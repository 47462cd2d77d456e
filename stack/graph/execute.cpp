#include "stack/graph/execute.hpp"

#include "common/util/error.hpp"

namespace npusim::stack::graph {

Executor::Executor(const Program& p, const config::ChipConfig& chip, std::uint32_t max_streams) : p_(p) {
  for (const Step& s : p.steps) {
    const ops::OpDef* op = ops::find_op(s.op);
    if (!op) throw InputError("node '" + s.node + "': no library op '" + s.op + "'");
    std::vector<ops::TensorDesc> in;
    for (std::size_t i = 0; i < s.inputs.size(); ++i) {
      ops::TensorDesc d = p.tensors[static_cast<std::size_t>(s.inputs[i])].desc;
      if (i < s.shapes.size()) d.shape = s.shapes[i];
      in.push_back(d);
    }
    try {
      ops::OpPlan plan = ops::plan_op(*op, in, s.call, chip);
      for (int same : plan.in_place)
        if (same >= 0) throw InputError(s.op + " updates a tensor in place, which a graph step cannot (yet)");
      for (std::size_t o = 0; o < s.outputs.size(); ++o) {
        const ops::TensorDesc& want = p.tensors[static_cast<std::size_t>(s.outputs[o])].desc;
        if (ops::elements(plan.outputs.at(o).shape) != ops::elements(want.shape) || plan.outputs[o].dtype != want.dtype)
          throw InputError(s.op + " gives " + ops::shape_string(plan.outputs[o].shape) + " " +
                           std::string(hw::isa::dtype_name(plan.outputs[o].dtype)) + ", the graph expects " +
                           ops::shape_string(want.shape) + " " + std::string(hw::isa::dtype_name(want.dtype)));
      }
      plans_.push_back(std::move(plan));
    } catch (const InputError& e) {
      throw InputError("node '" + s.node + "': " + e.what());
    }
  }
  std::vector<std::uint64_t> workspaces;
  for (const ops::OpPlan& plan : plans_) workspaces.push_back(plan.workspace_bytes);
  streams_ = assign_streams(p, max_streams);
  memory_ = plan_memory(p, workspaces, streams_);
}

Execution Executor::run(runtime::Device& dev, const std::vector<std::vector<std::uint8_t>>& inputs) const {
  check_inputs(dev, inputs);
  Execution ex;
  dev.run([&](runtime::Device& d) {
    std::vector<runtime::Stream> streams;
    ex = enqueue(d, inputs, streams, false);
  });
  return ex;
}

void Executor::check_inputs(const runtime::Device& dev, const std::vector<std::vector<std::uint8_t>>& inputs) const {
  if (dev.chip().mode() != hw::core::Mode::kFunctional) return;
  if (inputs.size() != p_.inputs.size())
    throw InputError("the program takes " + std::to_string(p_.inputs.size()) + " inputs, " + std::to_string(inputs.size()) + " given");
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    const ProgramTensor& t = p_.tensors[static_cast<std::size_t>(p_.inputs[k])];
    if (inputs[k].size() != t.desc.bytes())
      throw InputError("input '" + t.name + "': " + std::to_string(inputs[k].size()) + " bytes given, " +
                       ops::shape_string(t.desc.shape) + " " + std::string(hw::isa::dtype_name(t.desc.dtype)) + " takes " +
                       std::to_string(t.desc.bytes()));
  }
}

Execution Executor::enqueue(runtime::Device& d, const std::vector<std::vector<std::uint8_t>>& inputs,
                            std::vector<runtime::Stream>& pool, bool release) const {
  Execution ex;
  const bool functional = d.chip().mode() == hw::core::Mode::kFunctional;
  {
    while (pool.size() < streams_.streams) pool.push_back(d.create_stream());
    const std::vector<runtime::Stream> streams(pool.begin(), pool.begin() + streams_.streams);
    ex.streams = streams_.streams;
    const runtime::Stream s0 = streams[0];
    const std::uint64_t constants = d.malloc(std::max<std::uint64_t>(memory_.constant_bytes, MemoryPlan::kAlign));
    const std::uint64_t arena = d.malloc(std::max<std::uint64_t>(memory_.arena_bytes, MemoryPlan::kAlign));
    ex.device_bytes = memory_.peak_bytes();
    ex.constant_bytes = memory_.constant_bytes;
    ex.arena_bytes = memory_.arena_bytes;
    ex.naive_bytes = memory_.naive_bytes;
    std::vector<std::uint64_t> addr(p_.tensors.size(), 0);
    for (std::size_t i = 0; i < p_.tensors.size(); ++i) addr[i] = (memory_.constant[i] ? constants : arena) + memory_.offset[i];
    // Loading the model: the constants go in once, before the first execution (as aclmdlLoad does).
    for (std::size_t i = 0; i < p_.tensors.size(); ++i) {
      const ProgramTensor& t = p_.tensors[i];
      if (!t.constant.empty() && t.alias < 0) d.memcpy_async(addr[i], t.constant.data(), t.constant.size(), s0);
    }
    d.synchronize(s0);
    ex.first_execute_task = d.submitted();
    for (std::size_t k = 0; k < p_.inputs.size(); ++k) {
      const auto i = static_cast<std::size_t>(p_.inputs[k]);
      if (p_.tensors[i].desc.bytes() == 0) continue;  // an empty tensor: nothing to copy
      d.memcpy_async(addr[i], functional ? inputs.at(k).data() : nullptr, p_.tensors[i].desc.bytes(), s0);
    }
    // The other streams start once the copies are in.
    if (streams.size() > 1) {
      const runtime::Event copied = d.create_event();
      d.record(copied, s0);
      for (std::size_t k = 1; k < streams.size(); ++k) d.wait(copied, streams[k]);
    }
    std::vector<runtime::Event> events;
    for (std::uint32_t e = 0; e < streams_.events; ++e) events.push_back(d.create_event());
    for (std::size_t k = 0; k < p_.steps.size(); ++k) {
      const Step& st = p_.steps[k];
      const ops::OpPlan& plan = plans_[k];
      const runtime::Stream s = streams[streams_.stream[k]];
      for (std::int32_t e : streams_.waits[k]) d.wait(events[static_cast<std::size_t>(e)], s);
      std::vector<std::uint64_t> buf;
      for (int i : st.inputs) buf.push_back(addr[static_cast<std::size_t>(i)]);
      for (int o : st.outputs) buf.push_back(addr[static_cast<std::size_t>(o)]);
      if (plan.workspace_bytes) buf.push_back(arena + memory_.workspace_offset[k]);
      const std::string kernel = st.kernel.empty() ? ops::kernel_name(st.op) : st.kernel;
      const std::uint32_t task = d.submitted();  // the id the launch gets
      d.launch(kernel, plan.type, plan.block_dim, plan.kernel(buf), s);
      d.annotate(task, st.sources);
      if (streams_.event_of[k] >= 0) d.record(events[static_cast<std::size_t>(streams_.event_of[k])], s);
      ex.steps.push_back({{"node", st.node},
                          {"nodes", st.sources},
                          {"task", task},
                          {"op", st.op},
                          {"kernel", kernel},
                          {"block_dim", plan.block_dim},
                          {"stream", streams_.stream[k]},
                          {"tiling", plan.tiling}});
    }
    for (std::size_t k = 1; k < streams.size(); ++k) {  // stream 0 copies the outputs once every stream is done
      const runtime::Event done = d.create_event();
      d.record(done, streams[k]);
      d.wait(done, s0);
    }
    ex.outputs.resize(p_.outputs.size());
    for (std::size_t k = 0; k < p_.outputs.size(); ++k) {
      const auto i = static_cast<std::size_t>(p_.outputs[k]);
      if (functional) ex.outputs[k].resize(p_.tensors[i].desc.bytes());
      if (p_.tensors[i].desc.bytes() == 0) continue;
      d.memcpy_async(functional ? ex.outputs[k].data() : nullptr, addr[i], p_.tensors[i].desc.bytes(), s0);
    }
    d.synchronize();
    if (release) {
      d.free(arena);
      d.free(constants);
    }
  }
  return ex;
}

}  // namespace npusim::stack::graph
