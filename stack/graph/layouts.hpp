// Tensor layouts across a lowered program. Convolutions and pooling run on NC1HWC0 (stack/ops/conv), and their
// lowering converts each input from NCHW and each result back (trans_data). propagate_nc1hwc0 then keeps a CNN's
// activations in NC1HWC0 as CANN does: a conversion to NC1HWC0 of a tensor that was converted from NC1HWC0 (or is
// an exact cast of one) is dropped and its readers read the NC1HWC0 tensor; an elementwise step (add, relu, a fused
// expression...) whose inputs all have an NC1HWC0 form of its output's NCHW shape also runs on those forms (in their
// 16-bit type), provided it maps 0 to 0 (the padded channels stay 0); its NCHW output is still produced as before
// (a float32 one by the original step), and dropped with the other unread steps when nothing reads it.
#pragma once

#include "stack/graph/lower.hpp"

namespace npusim::stack::graph {

void propagate_nc1hwc0(Program& p);

}  // namespace npusim::stack::graph
