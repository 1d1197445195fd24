"""The subcommands of ``glassformer``, one module each.

Every module has ``register(commands)``, which adds the command's parser (its flags and
``--help`` text) to the subcommands of the ``glassformer`` parser and sets ``handler``:
the module's ``run(args)``, which `glassformer.cli.main` calls with the parsed arguments
and which returns the exit status. ``run`` reads the flags, calls the same library
functions a Python user calls, and prints.
"""
