"""A PyTorch module through ONNX, in memory: what Model.from_torch exports and the weights it
gives the imported model."""
import copy
import io


def onnx_bytes(module, example_input):
    """The module exported by torch.onnx.export in training mode (Dropout and BatchNorm kept as
    nodes, nothing folded), with a dynamic batch, as the file's bytes. A copy is traced, so the
    module's BatchNorm statistics stay as they are."""
    import torch
    if not isinstance(module, torch.nn.Module):
        raise TypeError(f"from_torch(module): a torch.nn.Module expected (got "
                        f"{type(module).__name__})")
    if not isinstance(example_input, torch.Tensor):
        raise TypeError("from_torch(example_input): a torch.Tensor expected (one batch the "
                        f"module takes; got {type(example_input).__name__})")
    buffer = io.BytesIO()
    try:
        torch.onnx.export(copy.deepcopy(module), example_input, buffer, input_names=["input"],
                          output_names=["output"],
                          dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}},
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
    except Exception as e:  # the exporter's own refusal (an op ONNX lacks, a bad input)
        raise ValueError(f"from_torch: torch.onnx.export failed: {e}") from e
    return buffer.getvalue()


def state_of(module):
    """The module's parameters and buffers (BatchNorm's num_batches_tracked too) as float32 NumPy
    arrays, under their state_dict names."""
    return {name: t.detach().cpu().float().numpy() for name, t in module.state_dict().items()}
