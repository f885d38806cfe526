/**
 * Templates shipped with hostd. Each is the text of a template file (the
 * format of `apps.templates_dir`, docs/apps.md): so the bundled ones go
 * through exactly the checks an operator's own do.
 */
/** A template file's text and its id (the file name without extension). */
export interface TemplateSource {
  id: string;
  text: string;
}

export const BUNDLED: TemplateSource[] = [
  {
    id: 'whoami',
    text: `
name: Whoami
description: A tiny web server that answers with the request it received; handy to test the proxy.
ports:
  - name: WEB_PORT
    container_port: 80
    default: 8080
    description: HTTP
compose: |
  services:
    whoami:
      image: traefik/whoami:v1.10
      restart: unless-stopped
      ports:
        - "\${HOSTD_PUBLISH_ADDRESS}:\${WEB_PORT}:80"
`,
  },
  {
    id: 'static-site',
    text: `
name: Static web site
description: nginx serving the files of a folder (assign a folder to 'site').
default_name: site
ports:
  - name: WEB_PORT
    container_port: 80
    default: 8081
    description: HTTP
data_folders:
  - id: site
    service: web
    container_path: /usr/share/nginx/html
    read_only: true
    description: The site's files (index.html at the top)
compose: |
  services:
    web:
      image: nginx:1.27-alpine
      restart: unless-stopped
      ports:
        - "\${HOSTD_PUBLISH_ADDRESS}:\${WEB_PORT}:80"
`,
  },
  {
    id: 'uptime-kuma',
    text: `
name: Uptime Kuma
description: Self-hosted monitoring with status pages; its database lives in the app's data directory.
ports:
  - name: WEB_PORT
    container_port: 3001
    default: 3001
    description: Web interface
compose: |
  services:
    kuma:
      image: louislam/uptime-kuma:1
      restart: unless-stopped
      ports:
        - "\${HOSTD_PUBLISH_ADDRESS}:\${WEB_PORT}:3001"
      volumes:
        - data:/app/data
  volumes:
    data: {}
`,
  },
];
