// Paths and status helpers for KubeVirt objects.

export const vmsPath = (ns) => `/apis/kubevirt.io/v1/namespaces/${encodeURIComponent(ns)}/virtualmachines`;
export const vmisPath = (ns) => `/apis/kubevirt.io/v1/namespaces/${encodeURIComponent(ns)}/virtualmachineinstances`;

const sub = '/apis/subresources.kubevirt.io/v1/namespaces';

/** subPath is a subresource of a VM (kind "virtualmachines") or VMI. */
export const subPath = (ns, kind, name, what) =>
  `${sub}/${encodeURIComponent(ns)}/${kind}/${encodeURIComponent(name)}/${what}`;

export function condition(obj, type) {
  return obj?.status?.conditions?.find((c) => c.type === type);
}

export function isTrue(obj, type) {
  return condition(obj, type)?.status === 'True';
}

/** status is the VM's one-word summary (printableStatus, as kubectl shows). */
export function status(vm, vmi) {
  if (vm?.status?.printableStatus) return vm.status.printableStatus;
  if (vmi) return isTrue(vmi, 'Paused') ? 'Paused' : vmi.status?.phase || 'Unknown';
  return 'Stopped';
}

export function running(vmi) {
  return vmi?.status?.phase === 'Running' && !vmi.metadata?.deletionTimestamp;
}

export function ip(vmi) {
  const addrs = (vmi?.status?.interfaces || []).map((i) => i.ipAddress).filter(Boolean);
  return addrs.join(', ');
}

export function hasGraphics(vmi) {
  return vmi?.spec?.domain?.devices?.autoattachGraphicsDevice !== false;
}

/** actions lists the lifecycle buttons and whether each applies now. */
export function actions(vm, vmi) {
  const on = running(vmi);
  const paused = isTrue(vmi, 'Paused');
  return [
    { name: 'start', kind: 'virtualmachines', enabled: !vmi },
    { name: 'stop', kind: 'virtualmachines', enabled: !!vmi },
    { name: 'restart', kind: 'virtualmachines', enabled: !!vmi },
    { name: 'pause', kind: 'virtualmachineinstances', enabled: on && !paused },
    { name: 'unpause', kind: 'virtualmachineinstances', enabled: on && paused },
  ];
}
