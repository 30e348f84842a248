"""Runs a notebook headless, as an analyst's scheduler would: by the notebook test, in the
analyst's virtualenv (nbclient, ipykernel and the notebook's own packages from PyPI).

It imports nothing from this repository. Reads a JSON job (argv[1]): the notebook, where to
write it executed, the kernel's working folder, a time limit per cell and the names of the
notebook's pandas frames to report. Every cell runs in order in one kernel (an error in a
cell stops the run: the script exits non-zero with the cell's traceback); then, in the same
kernel, a last cell that is not saved prints the frames as JSON, which this script prints as
its last line.
"""

import json
import sys

PROBE = """
import json as _json
print(_json.dumps({_name: globals()[_name].to_json(orient="split", date_format="iso")
                   for _name in %r}))
"""


def main() -> None:
    import nbformat
    from nbclient import NotebookClient

    with open(sys.argv[1], encoding="utf-8") as file:
        job = json.load(file)
    notebook = nbformat.read(job["notebook"], as_version=4)
    client = NotebookClient(
        notebook,
        timeout=job["cell_timeout_s"],
        kernel_name="python3",
        resources={"metadata": {"path": job["cwd"]}},
    )
    cells = list(notebook.cells)
    probe = nbformat.v4.new_code_cell(PROBE % (job["frames"],))
    try:
        with client.setup_kernel():
            for index, cell in enumerate(cells):
                client.execute_cell(cell, index)
            notebook.cells.append(probe)
            client.execute_cell(probe, len(cells))
    finally:
        notebook.cells = cells
        nbformat.write(notebook, job["executed"])
    printed = "".join(o.get("text", "") for o in probe.outputs if o.output_type == "stream")
    frames = json.loads(printed.strip().splitlines()[-1])
    print(json.dumps({name: json.loads(frame) for name, frame in frames.items()}))


if __name__ == "__main__":
    main()
