"""deploy/: every setting is one its software documents, with a value it takes, and the
single-server configuration starts a real hub.

- deploy/jupyterhub_config.py: each `c.Class.trait` is a configurable trait of the class that
  documents it (JupyterHub, Authenticator, Spawner, SystemdSpawner), validated by that trait;
  started with jupyterhub on free localhost ports, the hub answers its API and runs the idle
  culler with the role the file gives it.
- deploy/z2jh-values.yaml: valid under the Zero to JupyterHub chart's values schema (an excerpt,
  tests/data/z2jh-values-schema.json, which forbids unknown keys); its profiles use only the keys
  KubeSpawner's profile_list documents, and their overrides are KubeSpawner traits.
- deploy/nbgrader-exchange.yaml: the claim the values file mounts, shared by every pod.
"""
import asyncio
import copy
import getpass
import json
import secrets
import subprocess
import sys
import tempfile
from importlib import import_module
from pathlib import Path

import psutil
import pytest
import yaml
from traitlets import HasTraits
from traitlets.config.loader import PyFileConfigLoader

from hub import hub_proxy
from tools import loadtest

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
SCHEMA = Path(__file__).parent / "data" / "z2jh-values-schema.json"

# Where the classes deploy/jupyterhub_config.py configures are documented.
CLASSES = {
    "JupyterHub": "jupyterhub.app.JupyterHub",
    "Authenticator": "jupyterhub.auth.Authenticator",
    "Spawner": "jupyterhub.spawner.Spawner",
    "SystemdSpawner": "systemdspawner.SystemdSpawner",
}


def _class(dotted: str) -> type:
    module, _, name = dotted.rpartition(".")
    return getattr(import_module(module), name)


def single_server_config():
    return PyFileConfigLoader("jupyterhub_config.py", str(DEPLOY)).load_config()


@pytest.mark.slow  # 1-2.8 s
def test_single_server_settings_are_documented_traits_with_valid_values():
    config = single_server_config()
    assert set(config) <= set(CLASSES), f"undocumented classes: {set(config) - set(CLASSES)}"
    for section, settings in config.items():
        traits = _class(CLASSES[section]).class_traits(config=True)
        for name, value in settings.items():
            assert name in traits, f"{section}.{name} is not a setting of {CLASSES[section]}"
            traits[name].validate(HasTraits(), value)  # a TraitError for a value it does not take
    assert _class(config.JupyterHub.spawner_class).__name__ == "SystemdSpawner"
    # The limits are a student's share of the load test's figures, the same on both set-ups.
    values = yaml.safe_load((DEPLOY / "z2jh-values.yaml").read_text())
    assert config.SystemdSpawner.mem_limit == values["singleuser"]["memory"]["limit"]
    assert config.SystemdSpawner.cpu_limit == values["singleuser"]["cpu"]["limit"]
    assert config.Spawner.environment["FCL_CPU_THREADS"] == \
        values["singleuser"]["extraEnv"]["FCL_CPU_THREADS"]


def test_kernels_use_unix_sockets_as_in_the_load_test():
    """The single-user servers' one option, kernels on Unix sockets, is a setting of the kernel
    manager with a value it takes; the load test runs its students' servers with it."""
    from jupyter_client.manager import KernelManager
    (option,) = single_server_config().Spawner.args
    name, value = option.removeprefix("--KernelManager.").split("=")
    KernelManager.class_traits(config=True)[name].validate(HasTraits(), value)
    assert option == loadtest.IPC_KERNELS
    # A kernel's socket, in the student's private /tmp, fits a Unix socket's 107 bytes.
    config = single_server_config()
    runtime = config.Spawner.environment["JUPYTER_RUNTIME_DIR"]
    assert runtime.startswith("/tmp/") and config.SystemdSpawner.isolate_tmp
    assert len(f"{runtime}/kernel-{'0' * 36}-ipc-65535") <= 107


def test_the_idle_cullers_options_are_its_own():
    culler = next(s for s in single_server_config().JupyterHub.services
                  if s["name"] == "idle-culler")
    assert culler["command"][:3] == [sys.executable, "-m", "jupyterhub_idle_culler"]
    done = subprocess.run([*culler["command"][:3], "--help"], capture_output=True, text=True,
                          timeout=60)
    for argument in culler["command"][3:]:
        option = argument.split("=")[0]
        assert option in done.stdout + done.stderr, f"the idle culler has no option {option}"


@pytest.mark.slow
def test_the_single_server_configuration_starts_a_hub():
    """The file as a teacher runs it, on free ports and a scratch directory, with the proxy of
    `make test-setup`: the hub answers, lists the idle culler and runs it. The one change: the
    instructor (an account the teacher makes on the machine) is this machine's current user, since
    the hub refuses to start with an admin that has no account."""
    proxy, token = hub_proxy(), secrets.token_hex(16)
    with tempfile.TemporaryDirectory(prefix="fcl-deploy-") as scratch:
        workdir = Path(scratch)
        port = loadtest.free_port()
        (workdir / "jupyterhub_config.py").write_text(f"""\
c = get_config()  # noqa
load_subconfig({str(DEPLOY / "jupyterhub_config.py")!r})
c.JupyterHub.bind_url = "http://127.0.0.1:{port}"
c.JupyterHub.hub_bind_url = "http://127.0.0.1:{loadtest.free_port()}"
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{loadtest.free_port()}"
c.ConfigurableHTTPProxy.command = [{proxy!r}]
c.ConfigurableHTTPProxy.pid_file = {str(workdir / "proxy.pid")!r}
c.JupyterHub.db_url = "sqlite:///{workdir / "jupyterhub.sqlite"}"
c.JupyterHub.cookie_secret_file = {str(workdir / "cookie_secret")!r}
c.Authenticator.admin_users = {{{getpass.getuser()!r}}}
c.JupyterHub.services.append({{"name": "deploy-test", "api_token": {token!r}}})
c.JupyterHub.load_roles.append({{"name": "deploy-test", "scopes": ["list:services",
    "read:services"], "services": ["deploy-test"]}})
""")
        with loadtest.running_hub_from(workdir / "jupyterhub_config.py", workdir, port,
                                       token) as hub:
            services = asyncio.run(_services(hub))
            assert services["idle-culler"]["command"][-1] == "--timeout=3600"
            culler = [p for p in psutil.Process(hub.process.pid).children(recursive=True)
                      if "jupyterhub_idle_culler" in " ".join(p.cmdline())]
            assert culler and culler[0].is_running(), hub.log.read_text()[-3000:]


async def _services(hub) -> dict:
    await loadtest.wait_for_api(hub)
    return await loadtest.call(hub, "GET", "/hub/api/services")


def test_the_kubernetes_values_follow_the_charts_schema():
    import jsonschema  # 2 s to import (its URI grammars): not at collection, in every process

    schema = json.loads(SCHEMA.read_text())
    values = yaml.safe_load((DEPLOY / "z2jh-values.yaml").read_text())
    jsonschema.validate(values, schema)
    # The excerpt does check: a misspelt key and a value of the wrong type are refused.
    misspelt = copy.deepcopy(values)
    misspelt["singleuser"]["memmory"] = misspelt["singleuser"].pop("memory")
    wrong_type = copy.deepcopy(values)
    wrong_type["cull"]["timeout"] = "1h"
    for bad in (misspelt, wrong_type):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)


def test_the_kubernetes_profiles_are_kubespawners():
    """The chart passes singleuser.profileList to KubeSpawner.profile_list unchecked: its keys are
    the ones that trait's documentation lists, and each override is a KubeSpawner setting."""
    from kubespawner import KubeSpawner
    documented = KubeSpawner.class_traits()["profile_list"].help
    traits = KubeSpawner.class_traits(config=True)
    profiles = yaml.safe_load((DEPLOY / "z2jh-values.yaml").read_text())["singleuser"][
        "profileList"]
    assert sum(bool(p.get("default")) for p in profiles) == 1
    for profile in profiles:
        for key in profile:
            assert f"`{key}`" in documented, f"profile_list documents no key {key}"
        for name, value in profile.get("kubespawner_override", {}).items():
            assert name in traits, f"{name} is not a KubeSpawner setting"
            traits[name].validate(HasTraits(), value)
    gpu = next(p for p in profiles if "kubespawner_override" in p)
    assert gpu["kubespawner_override"]["extra_resource_limits"] == {"nvidia.com/gpu": "1"}


def test_the_nbgrader_exchange_is_the_claim_every_pod_mounts():
    claim = yaml.safe_load((DEPLOY / "nbgrader-exchange.yaml").read_text())
    assert claim["kind"] == "PersistentVolumeClaim"
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]  # every student's pod at once
    storage = yaml.safe_load((DEPLOY / "z2jh-values.yaml").read_text())["singleuser"]["storage"]
    volume = next(v for v in storage["extraVolumes"] if v["name"] == "nbgrader-exchange")
    assert volume["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
    mount = next(m for m in storage["extraVolumeMounts"] if m["name"] == "nbgrader-exchange")
    # nbgrader's default exchange directory (Exchange.root).
    from nbgrader.exchange.default.exchange import Exchange
    assert mount["mountPath"] == Exchange.class_traits()["root"].default_value
