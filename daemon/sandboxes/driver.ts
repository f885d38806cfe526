/**
 * What the sandbox service needs of its runtime: the VM service of the vms
 * domain (one QEMU driver for both domains; docs/vms.md, "For other domains").
 * Sandboxes' VMs carry the owner `sandbox`, so /vms neither lists nor acts on
 * them, and the label `sandbox_id` (or `sandbox_warm_build` for the VM a warm
 * state is saved from), so that recovery can match VMs and records.
 */
import type { VmService } from '../vms/index.js';

export type SandboxVms = Pick<
  VmService,
  | 'requirePrograms'
  | 'image'
  | 'create'
  | 'restoreWarmState'
  | 'start'
  | 'suspend'
  | 'resume'
  | 'remove'
  | 'exec'
  | 'waitReady'
  | 'saveWarmState'
  | 'warmStates'
  | 'deleteWarmState'
  | 'get'
  | 'listOwned'
  | 'guestInfo'
  | 'capacity'
  | 'hostStatus'
  | 'allImages'
  | 'guestFileGet'
  | 'guestFilePut'
  | 'guestFileDelete'
> &
  Partial<Pick<VmService, 'onStateChange'>>;

export type { VmView } from '../vms/service.js';
/** An image or template of the VM domain, as a sandbox boots from it. */
export type SandboxImage = Awaited<ReturnType<VmService['image']>>;

/** The VM owner marker of sandboxes' VMs and warm states. */
export const OWNER = 'sandbox';
export const O = { owner: OWNER } as const;
/** The label naming the sandbox a VM belongs to. */
export const SANDBOX_LABEL = 'sandbox_id';
/** The label of the VM a warm state is being saved from (its image id). */
export const WARM_BUILD_LABEL = 'sandbox_warm_build';
