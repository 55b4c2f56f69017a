"""Where the package makes tensors: each creation reads its device from the model or its inputs,
except the few listed here, each made on the CPU on purpose (and moved, or CPU-only by design)."""
import ast
from collections import Counter
from pathlib import Path

import spacy_elmo

PACKAGE = Path(spacy_elmo.__file__).parent
FACTORIES = {"zeros", "ones", "empty", "full", "tensor", "arange", "rand", "randn", "randint", "eye", "linspace", "as_tensor"}
# (module, function, factory): count, why on the CPU
ON_THE_CPU = {
    ("bilm/model.py", "forward", "arange"): (1, "the mask is built beside the CPU lengths, then moved (mask_dev)"),
    ("bilm/model.py", "_reversal_index", "arange"): (1, "an index computed from CPU lengths; the caller moves it"),
    ("bilm/scalar_mix.py", "__init__", "tensor"): (2, "parameters at construction; .to() moves them with the module"),
    ("bilm/softmax.py", "__init__", "empty"): (1, "a parameter at construction; .to() moves it"),
    ("bilm/softmax.py", "__init__", "zeros"): (1, "a parameter at construction; .to() moves it"),
    ("bilm/softmax.py", "sample", "empty"): (1, "the sampler draws on the CPU's seeded generator, the same ids on any device"),
    ("bilm/softmax.py", "sample", "rand"): (1, "the sampler draws on the CPU's seeded generator, the same ids on any device"),
    ("bilm/softmax.py", "sample", "full"): (1, "the sampler draws on the CPU's seeded generator, the same ids on any device"),
    ("bilm/softmax.py", "sample", "arange"): (1, "the sampler draws on the CPU's seeded generator, the same ids on any device"),
    ("fast/train_payoff.py", "step_products", "randn"): (6, "operands of the CPU products timed (choose times CPUs only)"),
    ("fast/train_payoff.py", "step_products", "empty"): (4, "their outputs, on the CPU with them"),
    ("fast/dropout.py", "dropout", "randint"): (1, "the seed: one number from torch's CPU generator, which manual_seed sets"),
    ("fast/int8_rows.py", "pack", "zeros"): (1, "int8 runs on the CPU only (Precision.cpu_only)"),
    ("fast/int8_rows.py", "unit_order", "arange"): (3, "int8 runs on the CPU only (Precision.cpu_only)"),
    ("fast/payoff.py", "step_products", "randn"): (3, "times CPU kernels only: check_pass returns before off the CPU"),
    ("fast/payoff.py", "step_products", "empty"): (2, "times CPU kernels only: check_pass returns before off the CPU"),
    ("fast/payoff.py", "route_products", "randn"): (4, "times CPU routes only: choose_routes measures float32 CPU weights"),
    ("fast/payoff.py", "route_products", "empty"): (2, "times CPU routes only: choose_routes measures float32 CPU weights"),
    ("fast/precision.py", "_pack_int8", "zeros"): (1, "int8 runs on the CPU only (Precision.cpu_only)"),
    ("fast/precision.py", "_probe_full_range", "ones"): (2, "probes the CPU's int8 engine"),
    ("io/efml.py", "_gate_order", "arange"): (1, "reorders weights while a file is read, before any device"),
    ("probes/linear.py", "train_linear", "zeros"): (3, "a probe trains on CPU features (numpy arrays)"),
    ("probes/linear.py", "train_linear", "ones"): (1, "a probe trains on CPU features (numpy arrays)"),
    ("training/head.py", "head_vocab", "tensor"): (1, "compares vocabulary orders, integers on the CPU"),
    ("training/head.py", "head_vocab", "arange"): (1, "compares vocabulary orders, integers on the CPU"),
    ("usage/substitutes.py", "to_dict", "tensor"): (1, "a Python float's exp for a JSON record"),
}


def tensor_creations_without_a_device() -> Counter:
    found: Counter = Counter()
    for path in sorted(PACKAGE.rglob("*.py")):
        module = path.relative_to(PACKAGE).as_posix()
        stack = []

        class Visitor(ast.NodeVisitor):
            def visit_FunctionDef(self, node):
                stack.append(node.name)
                self.generic_visit(node)
                stack.pop()

            visit_AsyncFunctionDef = visit_FunctionDef

            def visit_Call(self, node):
                f = node.func
                if (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "torch"
                        and f.attr in FACTORIES and not any(k.arg == "device" for k in node.keywords)):
                    found[(module, stack[-1] if stack else "<module>", f.attr)] += 1
                self.generic_visit(node)

        Visitor().visit(ast.parse(path.read_text(encoding="utf-8")))
    return found


def test_every_tensor_the_package_makes_reads_its_device_or_is_a_reviewed_cpu_one():
    found = tensor_creations_without_a_device()
    unexpected = {key: n for key, n in found.items() if ON_THE_CPU.get(key, (0,))[0] < n}
    assert not unexpected, (
        f"tensors made without device= (on the CPU whatever the model's device): {unexpected}; pass the "
        "model's or the inputs' device, or list the call in ON_THE_CPU with why it belongs on the CPU"
    )
    stale = {key for key in ON_THE_CPU if key not in found}
    assert not stale, f"ON_THE_CPU lists calls that are gone: {stale}"
