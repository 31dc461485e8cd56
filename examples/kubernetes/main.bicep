// An application on Kubernetes through the built-in Kubernetes extension: its namespace, a config map, a
// secret whose value is a secure parameter, a deployment and its service, and a CRD with two custom
// resources. Deploy it as a stack: what leaves the template is deleted from the cluster.
//
// The extension's config (the namespace and the secure kubeconfig) comes from main.bicepparam, the kubeconfig
// as a Key Vault reference: a stack reads it again at every operation (also when it later deletes), so a
// rotated credential is used from the next operation on and never stored in the stack.

@description('The namespace everything lives in.')
param namespace string = 'shop'

@description('The database password the application reads from its secret.')
@secure()
param dbPassword string

param replicas int = 2

extension kubernetes as k8s

resource ns 'core/Namespace@v1' = {
  metadata: { name: namespace }
}

resource settings 'core/ConfigMap@v1' = {
  metadata: { name: 'shop-settings', namespace: namespace }
  data: { LOG_LEVEL: 'info', FEATURE_CHECKOUT: 'on' }
  dependsOn: [ns]
}

resource credentials 'core/Secret@v1' = {
  metadata: { name: 'shop-db', namespace: namespace }
  type: 'Opaque'
  stringData: { password: dbPassword }
  dependsOn: [ns]
}

resource web 'apps/Deployment@v1' = {
  metadata: { name: 'shop-web', namespace: namespace, labels: { app: 'shop-web' } }
  spec: {
    replicas: replicas
    selector: { matchLabels: { app: 'shop-web' } }
    template: {
      metadata: { labels: { app: 'shop-web' } }
      spec: {
        containers: [
          {
            name: 'web'
            image: 'nginx:1.27'
            ports: [ { containerPort: 80 } ]
            envFrom: [ { configMapRef: { name: 'shop-settings' } } ]
            env: [ { name: 'DB_PASSWORD', valueFrom: { secretKeyRef: { name: 'shop-db', key: 'password' } } } ]
          }
        ]
      }
    }
  }
  dependsOn: [settings, credentials]
}

resource service 'core/Service@v1' = {
  metadata: { name: 'shop-web', namespace: namespace }
  spec: {
    selector: { app: 'shop-web' }
    ports: [ { port: 80, targetPort: 80 } ]
  }
  dependsOn: [ns]
}

resource backups 'apiextensions.k8s.io/CustomResourceDefinition@v1' = {
  metadata: { name: 'backups.shop.example.com' }
  spec: {
    group: 'shop.example.com'
    scope: 'Namespaced'
    names: { plural: 'backups', singular: 'backup', kind: 'Backup' }
    versions: [
      {
        name: 'v1'
        served: true
        storage: true
        schema: {
          openAPIV3Schema: {
            type: 'object'
            properties: {
              spec: {
                type: 'object'
                properties: { schedule: { type: 'string' }, retainDays: { type: 'integer' } }
              }
            }
          }
        }
      }
    ]
  }
}

resource nightly 'shop.example.com/Backup@v1' = {
  metadata: { name: 'nightly', namespace: namespace }
  spec: { schedule: '0 3 * * *', retainDays: 7 }
  dependsOn: [backups, ns]
}

resource weekly 'shop.example.com/Backup@v1' = {
  metadata: { name: 'weekly', namespace: namespace }
  spec: { schedule: '0 4 * * 0', retainDays: 30 }
  dependsOn: [backups, ns]
}

output serviceName string = service.properties.metadata.name
output clusterIP string = service.properties.spec.clusterIP
