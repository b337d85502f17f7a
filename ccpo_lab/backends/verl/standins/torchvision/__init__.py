"""Stand-in for torchvision in the CPU contract environment (what cannot exist here).

PyPI's Linux torchvision wheels need torch's CUDA libraries, so none imports beside the
CPU torch. verl-agent's ALFWorld module (``env_package/alfworld/envs.py``) imports
``torchvision.transforms`` at the top but uses it only to turn AlfredThorEnv frames into
tensors; the text environment the contract test runs never calls it. Only
``scripts/verl-agent-contract.sh`` (through ``PYTHONPATH``) and ``test_contract.py`` put
this directory on the path. It has no distribution metadata, so transformers does not
take it for a real torchvision.
"""
