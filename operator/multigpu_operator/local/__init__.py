"""Local runs: a MultiGPUJob's pods as processes on this machine (`mgj run FILE --local`).

`kubelet` and `plan` are pure (what a pod becomes locally); `outcome` applies the
operator's success rule to the exit codes; `runner` is the only module doing I/O.
"""
