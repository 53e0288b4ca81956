"""The LLVM back end: loop-IR PrimFuncs -> LLVM IR (codegen.py and the helpers it holds) ->
object code (objects.py)."""
