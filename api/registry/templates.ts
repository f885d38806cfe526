import type { OperationSpec } from './types.js';
import { imageId, nullable, object, resourceName, str, strMap, taskRecord } from './schema.js';
import { imageView, withTask } from './vms-shapes.js';

export const operations = [
  {
    name: 'templates_create',
    domain: 'templates',
    method: 'POST',
    path: '/templates',
    scopes: ['vm.manage', 'sandbox.manage'],
    hints: [],
    summary: 'Build a reusable VM template from a base image and a cloud-init script (runs as a background task).',
    category: 'system',
    params: {},
    args: {
      // The example names no catalog image, so a client trying the operation (the conformance walk) downloads nothing.
      base_image_id: { ...imageId('Base image to build from; downloaded first if the host lacks it'), examples: ['my-base'] },
      name: resourceName('Name of the resulting template; its image id is made from it'),
      user_data: str('Cloud-init user-data used verbatim; it must end by powering the build machine off, which signals the build is finished'),
      labels: strMap('Labels stored on the resulting image and returned by the VM image list'),
    },
    required: ['base_image_id', 'name'],
    result: withTask({ image_id: str('Id the template will have') }, ['image_id']),
  },
  {
    name: 'templates_get',
    domain: 'templates',
    method: 'GET',
    path: '/templates/{task_id}',
    scopes: ['vm.read', 'sandbox.read'],
    hints: ['RO'],
    summary: 'Report how a template build is going.',
    category: 'system',
    params: { task_id: str('Background task ID of the template build') },
    args: {},
    result: object({ task: taskRecord(), template: nullable(imageView()) }, ['task', 'template']),
  },
] as const satisfies readonly OperationSpec[];
