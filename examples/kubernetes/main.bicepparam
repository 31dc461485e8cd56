// Compiles to main.parameters.json (with Bicep's experimental `extensibility` and `moduleExtensionConfigs`).
using 'main.bicep'

param namespace = 'shop'
param dbPassword = az.getSecret('00000000-0000-0000-0000-000000000000', 'kubernetes', 'k8skv', 'shop-db-password')

extensionConfig k8s with {
  namespace: 'shop'
  kubeConfig: az.getSecret('00000000-0000-0000-0000-000000000000', 'kubernetes', 'k8skv', 'kubeconfig')
}
