"""JupyterHub on one server, for a small class: `sudo jupyterhub -f deploy/jupyterhub_config.py`.

Install first, as root, into the Python environment the hub and the students share:
`pip install jupyterhub jupyterhub-systemdspawner jupyterhub-idle-culler jupyterlab nbgrader .`
(from this checkout), `python install_kernel.py --sys-prefix`, and the proxy:
`npm install -g configurable-http-proxy` (or put deploy/proxy's on PATH). Students log in with
their accounts on this machine (PAM, JupyterHub's default authenticator). The sizes are the load
test's (`make loadtest`, README "A whole class on one JupyterHub"). tests/test_deploy.py checks
that every setting here is one the classes named document, and starts a hub from this file.
"""
import sys

c = get_config()  # noqa: F821 (JupyterHub's config loader defines it)

c.JupyterHub.bind_url = "http://:8000"  # behind a TLS proxy, or set ssl_cert and ssl_key
c.Authenticator.admin_users = {"instructor"}
c.Authenticator.allow_all = True  # every account on this machine; or list allowed_users

# Each student's server is a systemd unit running as the student, with hard limits: after a
# course notebook a kernel holds 70 to 126 MB of its own and the server 134 MB, besides the code
# of the libraries every student's processes share; a kernel reaches about 400 MB for a few
# seconds while it builds programs, and notebook 06's largest cells about 720 MB.
c.JupyterHub.spawner_class = "systemdspawner.SystemdSpawner"
c.SystemdSpawner.mem_limit = "1536M"
c.SystemdSpawner.cpu_limit = 1.0
c.SystemdSpawner.isolate_tmp = True
c.SystemdSpawner.disable_user_sudo = True
# Not isolate_devices: it would hide a GPU's device files from the kernels.
c.Spawner.default_url = "/lab"
# Kernels talk to their servers over Unix sockets in the student's runtime directory: over TCP,
# servers starting kernels at the same moment (a class pressing Run All) pick the same free
# ports, and a kernel that cannot bind its port dies (the load test lost one in 20 that way);
# sockets are also closed to the other users of the machine.
c.Spawner.args = ["--KernelManager.transport=ipc"]
# PoCL runs a kernel's OpenCL work on this many threads (the FCL kernel's default on a hub is 1):
# one student's benchmark cannot take the cores the others' cells need. The kernels' sockets go
# in the student's own /tmp (isolate_tmp): a Unix socket's path has at most 107 bytes, which a
# long user name under ~/.local/share/jupyter/runtime can exceed.
c.Spawner.environment = {"FCL_CPU_THREADS": "1", "JUPYTER_RUNTIME_DIR": "/tmp/jupyter-runtime"}

# Servers idle for an hour are stopped (jupyterhub-idle-culler, a service the hub runs), with only
# the permissions it needs.
c.JupyterHub.services = [{
    "name": "idle-culler",
    "command": [sys.executable, "-m", "jupyterhub_idle_culler", "--timeout=3600"],
}]
c.JupyterHub.load_roles = [{
    "name": "idle-culler",
    "scopes": ["list:users", "read:users:activity", "read:servers", "delete:servers"],
    "services": ["idle-culler"],
}]
