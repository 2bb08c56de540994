"""attnprof: capture, analyse and render PyTorch profiles of attention, stage by stage."""
