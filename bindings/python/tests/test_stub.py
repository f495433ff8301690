"""The hand-written type stub dds/_dds.pyi against the SWIG module it describes: every name the
stub declares exists (functions, constants, struct classes and their fields), and every public
function and constant of the module is declared."""

import ast
import os

import numpy as np

import dds
from dds import _dds


def _stub():
    path = os.path.join(os.path.dirname(dds.__file__), "_dds.pyi")
    with open(path) as f:
        return ast.parse(f.read())


def test_stub_names_exist_in_the_module():
    tree = _stub()
    missing = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name != "__getattr__":
            if not callable(getattr(_dds, node.name, None)):
                missing.append(node.name)
        elif isinstance(node, ast.AnnAssign):
            if not hasattr(_dds, node.target.id):
                missing.append(node.target.id)
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            cls = getattr(_dds, node.name, None)
            if cls is None:
                missing.append(node.name)
                continue
            obj = cls() if node.name.startswith("dds_") else None
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and obj is not None:
                    if not hasattr(obj, item.target.id):
                        missing.append(f"{node.name}.{item.target.id}")
                elif isinstance(item, ast.FunctionDef) and item.name != "__init__":
                    if not hasattr(cls, item.name):
                        missing.append(f"{node.name}.{item.name}()")
    assert not missing, f"declared in _dds.pyi but absent from dds._dds: {missing}"


def test_module_functions_and_constants_are_declared():
    tree = _stub()
    declared = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    declared |= {n.target.id for n in tree.body if isinstance(n, ast.AnnAssign)}
    undeclared = []
    for name in dir(_dds):
        if name.startswith("_") or name.endswith("_swigregister") or name.startswith("SWIG"):
            continue
        v = getattr(_dds, name)
        if isinstance(v, int) and name.startswith("DDS_") and name not in declared:
            undeclared.append(name)
        elif callable(v) and name.startswith("dds_") and name not in declared:
            undeclared.append(name)
    assert not undeclared, f"in dds._dds but not declared in _dds.pyi: {undeclared}"


def test_argument_struct_fields_are_declared():
    """Every field of the public argument structs (as the SWIG proxies expose them) is declared
    in the stub, so that fields appended to include/dds/dds.h reach the stub too."""
    tree = _stub()
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    undeclared = []
    for name in ("dds_sampler_config", "dds_sample_args", "dds_stash_args", "dds_reveal_args",
                 "dds_verify_args"):
        cls = getattr(_dds, name)
        fields = {k for k, v in vars(cls).items() if isinstance(v, property)}
        fields -= {"this", "thisown", "struct_size"}
        declared = {i.target.id for i in classes[name].body if isinstance(i, ast.AnnAssign)}
        undeclared += [f"{name}.{f}" for f in sorted(fields - declared)]
    assert not undeclared, f"fields of dds._dds structs not declared in _dds.pyi: {undeclared}"
    for field in ("allowed_token_masks", "allowed_mask_stride"):
        for name in ("dds_sample_args", "dds_stash_args", "dds_verify_args"):
            assert hasattr(getattr(_dds, name)(), field)
    assert _dds.dds_reveal_args().entropy_bound == np.float32(0.1)
    assert _dds.DDS_REVEAL_ENTROPY_BOUND == 4
    assert _dds.DDS_REQ_BAD_ENTROPY_BOUND == 8192
