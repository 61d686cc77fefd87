#!/bin/sh
# cli_attr_test.sh - op attributes end to end: a bad attr (axis out of range,
# a perm that is no permutation, two -1 in a reshape, an unknown cast dtype,
# a missing required attr) is a load-time error: `pardo check` and `pardo
# run` exit 2 naming FILE:LINE:COL, the op (index, name, type) and the attr,
# and run writes nothing. Also the math ops and a gradient op with variadic
# outputs (concat_grad) check and run.
# Usage: tests/cli_attr_test.sh PATH/TO/pardo
set -u
. "$(dirname "$0")/cli_lib.sh"
cli_setup cli-attr "$@"






# graph FILE OP IN ATTRS: a graph whose one op (line 4, column 3, named
# "culprit") reads feed x [-1, 3, 4] float32 (IN: its "in" list) with ATTRS
graph() {
    cat >"$1" <<EOF
{"pardo": 1, "blocks": [{"vars": {"x": {"dtype": "float32", "shape": [-1, 3, 4], "role": "feed"},
  "y": {"dtype": "float32", "shape": [-1, 5, 4], "role": "feed"}},
 "ops": [
  {"op": "$2", "name": "culprit", "in": $3, "out": ["z"], "attrs": $4}
 ]}]}
EOF
}

# attr_error NAME OP IN ATTRS ATTR WORD: check and run exit 2 naming file:4:3,
# op 0 'culprit' (OP), attr 'ATTR' and WORD
attr_error() {
    f="$T/$1.json"
    graph "$f" "$2" "$3" "$4"
    expect "$1: check" 2 "$f:4:3:" "block 0, op 0 'culprit' ($2)" "attr '$5'" "$6" -- check "$f"
    expect "$1: run" 2 "$f:4:3:" "'culprit' ($2)" "attr '$5'" -- run "$f" --out "$T/o-$1"
    no_file "$1: run" "$T/o-$1"
}

# ---- attribute errors are load-time errors -------------------------------
attr_error perm_dup transpose '["x"]' '{"perm": [0, 2, 2]}' perm "twice"
attr_error perm_range transpose '["x"]' '{"perm": [0, 1, 3]}' perm "expected a dim in [0, 2]"
attr_error perm_negative transpose '["x"]' '{"perm": [0, -1, 1]}' perm "is -1"
attr_error perm_length transpose '["x"]' '{"perm": [1, 0]}' perm "expected 3"
attr_error softmax_axis softmax '["x"]' '{"axis": 3}' axis "[-3, 2]"
attr_error log_softmax_axis log_softmax '["x"]' '{"axis": -4}' axis "is -4"
attr_error argmax_axis argmax '["x"]' '{"axis": 5}' axis "is 5"
attr_error reduce_max_axes reduce_max '["x"]' '{"axes": [0, 3]}' axes "is 3"
attr_error reduce_max_axes_twice reduce_max '["x"]' '{"axes": [1, -2]}' axes "more than once"
attr_error flatten_axis flatten '["x"]' '{"axis": 4}' axis "[-3, 3]"
attr_error concat_axis concat '["x", "y"]' '{"axis": 3}' axis "is 3"
attr_error concat_missing_axis concat '["x", "y"]' '{}' axis "required"
attr_error reshape_two_m1 reshape '["x"]' '{"shape": [-1, 2, -1]}' shape "at most one"
attr_error reshape_copy_past_rank reshape '["x"]' '{"shape": [0, 0, 0, 0]}' shape "rank 3"
attr_error cast_dtype cast '["x"]' '{"dtype": "float8"}' dtype "float8"
attr_error cast_missing cast '["x"]' '{}' dtype "required"
attr_error pow_missing pow '["x"]' '{}' exponent "required"
attr_error clip_type clip '["x"]' '{"min": "low"}' min "expected a number"
attr_error leaky_type leaky_relu '["x"]' '{"alpha": [1]}' alpha "expected a number"

# shape errors name the op and both shapes
f="$T/concat_dims.json"
graph "$f" concat '["x", "y"]' '{"axis": 2}'
expect "concat dims" 2 "$f:4:3:" "'culprit' (concat)" "input 1" "[-1, 5, 4]" "[-1, 3, 4]" -- check "$f"
f="$T/reshape_size.json"
graph "$f" reshape '["x"]' '{"shape": [0, 5, -1]}'
expect "reshape size" 2 "$f:4:3:" "'culprit' (reshape)" "[0, 5, -1]" "do not match" -- check "$f"
f="$T/grad_int.json"
cat >"$f" <<'EOF'
{"pardo": 1, "blocks": [{"vars": {"i": {"dtype": "int32", "shape": [3], "value": [1, 2, 3]}},
 "ops": [
  {"op": "identity", "in": ["i"], "out": ["j"]},
  {"op": "identity_grad", "name": "back", "in": ["i", "j", "j"], "out": ["di"]}
 ]}]}
EOF
expect "integer gradient" 2 "$f:4:3:" "'back' (identity_grad)" "int32" "gradient" -- check "$f"

# ---- the math ops check and run ------------------------------------------
f="$T/math.json"
cat >"$f" <<'EOF'
{"pardo": 1, "blocks": [{"vars": {"x": {"dtype": "float32", "shape": [2, 3], "value": [1, 5, 2, 7, 0, 3]}},
 "ops": [
  {"op": "transpose", "in": ["x"], "out": ["t"]},
  {"op": "concat", "in": ["t", "t"], "out": ["c"], "attrs": {"axis": 1}},
  {"op": "reduce_max", "in": ["c"], "out": ["m"], "attrs": {"axes": [0], "keepdims": false}},
  {"op": "argmax", "in": ["x"], "out": ["i"], "attrs": {"axis": 1}},
  {"op": "reshape", "in": ["c"], "out": ["r"], "attrs": {"shape": [0, -1, 2]}},
  {"op": "cast", "in": ["r"], "out": ["ri"], "attrs": {"dtype": "int32"}},
  {"op": "concat_grad", "in": ["t", "t", "c", "c"], "out": ["d0", "d1"], "attrs": {"axis": 1}},
  {"op": "clip", "in": ["x"], "out": ["k"], "attrs": {"max": 2.5}}
 ]}]}
EOF
expect "math check" 0 -- check "$f"
stdout_has "math check" "float32  [3, 4]"
stdout_has "math check" "int64    [2, 1]"
stdout_has "math check" "int32    [3, 2, 2]"
expect "math run" 0 -- run "$f" --fetch m --fetch i --fetch ri --fetch d1 --fetch k
stdout_has "math run" "m: float32 [4] = [5, 7, 5, 7]"
stdout_has "math run" "i: int64 [2, 1] = [1, 0]"
stdout_has "math run" "ri: int32 [3, 2, 2] = [1, 7, 1, 7, 5, 0"
stdout_has "math run" "d1: float32 [3, 2] = [1, 7, 5, 0, 2, 3]"
stdout_has "math run" "k: float32 [2, 3] = [1, 2.5, 2, 2.5, 0, 2.5]"
expect "ops gelu" 0 -- ops gelu
stdout_has "ops gelu" "gradient: yes (gelu_grad)"

cli_finish
