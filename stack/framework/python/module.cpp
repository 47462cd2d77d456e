// npusim._core: the Python module's native part, a thin binding of the stack's session API
// (stack/framework/session.hpp). Everything Pythonic (numpy and torch tensors, reports as objects, the torch_npu
// adaptor) lives in the package's Python files; this file only moves bytes, shapes and JSON across.
//
// SystemC elaborates one chip per process, so the process has one Session at a time, and once a session has
// finished no other can start: the module refuses a second one with an error that says so (docs/python.md).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/config/loader.hpp"
#include "common/util/error.hpp"
#include "hw/core/core_engine.hpp"
#include "stack/framework/llm.hpp"
#include "stack/framework/session.hpp"
#include "stack/ops/op.hpp"

namespace py = pybind11;
namespace fw = npusim::stack::framework;
namespace ops = npusim::stack::ops;

namespace {

bool g_session_started = false;  // SystemC: one chip per process

// A tensor crossing into C++: its description and, in functional mode, its bytes (copied, so the simulation can run
// without the GIL).
struct Tensor {
  ops::TensorDesc desc;
  std::vector<std::uint8_t> bytes;
};

Tensor tensor_from(const py::tuple& t) {
  // (shape: list[int], dtype: str, data: bytes-like or None)
  if (t.size() != 3) throw npusim::InputError("a tensor is (shape, dtype, data)");
  Tensor out;
  for (auto d : t[0].cast<py::list>()) {
    const long long v = d.cast<long long>();
    if (v < 0) throw npusim::InputError("a tensor dimension is negative (" + std::to_string(v) + ")");
    out.desc.shape.push_back(static_cast<std::uint64_t>(v));
  }
  if (out.desc.shape.empty()) out.desc.shape = {1};  // the program holds scalars as one element
  if (ops::elements(out.desc.shape) > ops::kMaxElements)
    throw npusim::InputError("a tensor of " + ops::shape_string(out.desc.shape) + " has more elements than npusim takes");
  out.desc.dtype = ops::parse_dtype(t[1].cast<std::string>(), true);
  if (!t[2].is_none()) {
    const py::buffer_info b = t[2].cast<py::buffer>().request();
    const auto n = static_cast<std::size_t>(b.size * b.itemsize);
    out.bytes.resize(n);
    if (n) std::memcpy(out.bytes.data(), b.ptr, n);
  }
  return out;
}

py::list bytes_list(const std::vector<std::vector<std::uint8_t>>& v) {
  py::list out;
  for (const auto& b : v) out.append(py::bytes(reinterpret_cast<const char*>(b.data()), b.size()));
  return out;
}

py::dict spec_dict(const fw::TensorSpec& s) {
  py::dict d;
  d["name"] = s.name;
  py::list shape;
  for (auto x : s.desc.shape) shape.append(x);
  d["shape"] = shape;
  d["dtype"] = std::string(npusim::hw::isa::dtype_name(s.desc.dtype));
  d["type"] = s.type;
  return d;
}

class PySession {
 public:
  PySession(const std::string& config, const std::vector<std::string>& sets, bool functional, const std::string& trace,
            const std::string& summary, const std::string& trace_level, const std::string& trace_cores) {
    if (g_session_started)
      throw std::runtime_error(
          "npusim simulates one device per process (SystemC elaborates one chip per process) and this process has "
          "already started one; run another configuration in another process (docs/python.md)");
    npusim::config::LoadedConfig loaded = npusim::config::load_config(config, sets);
    session_ = std::make_unique<fw::Session>(
        std::move(loaded), functional ? npusim::hw::core::Mode::kFunctional : npusim::hw::core::Mode::kTimingOnly,
        npusim::stack::runtime::OutputPaths{
            trace,
            summary,
            "",
            {npusim::stack::runtime::parse_trace_level(trace_level, "trace_level"), trace_cores, "trace_cores"}});
    g_session_started = true;
  }

  fw::Session& s() { return *session_; }

  // -> (outputs: list[bytes], report: JSON text)
  py::tuple run_op(const std::string& op, const std::map<std::string, std::string>& params, const py::list& inputs,
                   std::uint32_t warmup) {
    std::vector<ops::TensorDesc> descs;
    std::vector<std::vector<std::uint8_t>> values;
    for (auto t : inputs) {
      Tensor x = tensor_from(t.cast<py::tuple>());
      descs.push_back(x.desc);
      values.push_back(std::move(x.bytes));
    }
    fw::RunResult r;
    {
      py::gil_scoped_release release;
      r = session_->run_op(op, fw::Session::op_call(op, params), descs, values, params, warmup);
    }
    return py::make_tuple(bytes_list(r.outputs), r.report.dump());
  }

  py::tuple run(const fw::Model& model, const py::list& inputs) {
    std::vector<std::vector<std::uint8_t>> values;
    for (auto t : inputs) {
      const py::buffer_info b = t.cast<py::buffer>().request();
      const auto n = static_cast<std::size_t>(b.size * b.itemsize);
      values.emplace_back(n);
      if (n) std::memcpy(values.back().data(), b.ptr, n);
    }
    fw::RunResult r;
    {
      py::gil_scoped_release release;
      r = session_->run(model, values);
    }
    return py::make_tuple(bytes_list(r.outputs), r.report.dump());
  }

  // An LLM's prefill and decode steps (llm.hpp): the generated tokens per sequence, the logits as fp32 bytes
  // ([steps + 1, batch, vocab]) and the report.
  py::tuple generate(const std::string& model, std::uint32_t batch, std::uint32_t prompt_len, std::uint32_t decode,
                     std::uint32_t page, const std::vector<std::int32_t>& prompt, bool replay) {
    const fw::LlmConfig cfg = fw::LlmConfig::from_file(model);
    fw::GenerateOptions o;
    o.batch = batch;
    o.prompt_len = prompt_len;
    o.decode_steps = decode;
    o.page = page;
    o.prompt = prompt;
    o.replay = replay;
    o.weights_dir = cfg.dir;
    fw::GenerateResult r;
    {
      py::gil_scoped_release release;
      r = fw::generate(*session_, cfg, o);
    }
    std::string logits;
    for (const auto& step : r.logits)
      logits.append(reinterpret_cast<const char*>(step.data()), step.size() * sizeof(float));
    return py::make_tuple(r.tokens, py::bytes(logits), r.report.dump());
  }

  std::string finish() {
    nlohmann::json report = session_->report();
    {
      py::gil_scoped_release release;
      session_->finish(&report);
    }
    return report.dump();
  }

 private:
  std::unique_ptr<fw::Session> session_;
};

}  // namespace

// libsystemc's main() calls sc_main(); in the Python process main() is the interpreter's, and this definition only
// satisfies libsystemc's reference (it is never called).
int sc_main(int, char**) __attribute__((weak, visibility("default")));
int sc_main(int, char**) { return 1; }

PYBIND11_MODULE(_core, m) {
  m.doc() = "npusim's native core: the stack's session API (docs/python.md)";

  // InputError (bad input: config, shapes, parameters, models) -> npusim.InputError (a ValueError); a kernel or
  // device error -> npusim.DeviceError (a RuntimeError). ConfigError derives from InputError in C++, and both name
  // the file, key or node in their message.
  static py::exception<npusim::InputError> input_error(m, "InputError", PyExc_ValueError);
  static py::exception<npusim::hw::core::KernelError> device_error(m, "DeviceError", PyExc_RuntimeError);
  // NOLINTNEXTLINE(performance-unnecessary-value-param): pybind11's translator signature takes it by value
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const npusim::hw::core::KernelError& e) {
      device_error(e.what());
    } catch (const npusim::InputError& e) {
      input_error(e.what());
    }
  });

  py::class_<fw::Model>(m, "Model")
      .def_property_readonly("name", &fw::Model::name)
      .def_property_readonly("inputs", [](const fw::Model& mo) {
        py::list l;
        for (const auto& s : mo.inputs()) l.append(spec_dict(s));
        return l;
      })
      .def_property_readonly("outputs", [](const fw::Model& mo) {
        py::list l;
        for (const auto& s : mo.outputs()) l.append(spec_dict(s));
        return l;
      })
      .def("graph_report", [](const fw::Model& mo) { return mo.graph_report().dump(); });

  py::class_<PySession>(m, "Session")
      .def(py::init<const std::string&, const std::vector<std::string>&, bool, const std::string&, const std::string&,
                    const std::string&, const std::string&>(),
           py::arg("config"), py::arg("sets"), py::arg("functional"), py::arg("trace"), py::arg("summary"),
           py::arg("trace_level"), py::arg("trace_cores"))
      .def("chip_name", [](PySession& s) { return s.s().chip().name; })
      .def("functional", [](PySession& s) { return s.s().functional(); })
      .def("finished", [](PySession& s) { return s.s().finished(); })
      .def("compile_file",
           [](PySession& s, const std::string& path, const std::map<std::string, std::int64_t>& dims, bool fusion,
              std::uint32_t streams) {
             fw::CompileOptions o{dims, fusion, streams, {}};
             return fw::Model::from_file(path, s.s().chip(), o);
           })
      .def("compile_bytes",
           [](PySession& s, const py::bytes& bytes, const std::string& what,
              const std::map<std::string, std::int64_t>& dims, bool fusion, std::uint32_t streams) {
             fw::CompileOptions o{dims, fusion, streams, {}};
             return fw::Model::from_bytes(std::string(bytes), what, s.s().chip(), o);
           })
      .def("run", &PySession::run)
      .def("generate", &PySession::generate, py::arg("model"), py::arg("batch"), py::arg("prompt_len"),
           py::arg("decode"), py::arg("page"), py::arg("prompt"), py::arg("replay"))
      .def("run_op", &PySession::run_op, py::arg("op"), py::arg("params"), py::arg("inputs"), py::arg("warmup") = 0)
      .def("status", [](PySession& s) { return s.s().status().dump(); })
      .def("report", [](PySession& s) { return s.s().report().dump(); })
      .def("stats", [](PySession& s) { return s.s().device().chip().stats().to_json().dump(); })
      .def("finish", &PySession::finish);

  m.def("list_ops", [] {
    py::list l;
    for (const ops::OpDef& op : ops::all_ops()) {
      py::dict params;  // key -> its default as help shows it, None when required
      for (const ops::OpParam& p : op.params)
        params[py::str(p.key)] = p.required() ? py::object(py::none()) : py::str(p.def);
      l.append(py::make_tuple(op.name, op.summary, params));
    }
    return l;
  });
  m.def("kernel_name", &ops::kernel_name);
}
