// Azure OpenAI account with one deployment per tier. Each deployment has its own rate limiter; the two tiers use
// different models so their quotas never overlap (quota is per region, subscription, model and deployment type:
// Microsoft Learn, "Azure OpenAI quotas and limits").

@description('Azure region for the account; each tier\'s model must be offered there under its deployment type.')
param location string

@description('Tags applied to every resource.')
param tags object

@description('Account name, also its custom subdomain (the endpoint host name).')
param name string

@description('Turn off API-key access so only Entra ID (the managed identity) can call the account.')
param disableLocalAuth bool

@description('One entry per tier, keyed by tier name. capacity is in units of 1,000 tokens per minute.')
param deployments tierDeployments

@description('Enabled, or Disabled when the account is reached through its private endpoint only.')
@allowed([
  'Enabled'
  'Disabled'
])
param publicNetworkAccess string

@export()
@description('One tier\'s Azure OpenAI deployment.')
type modelDeployment = {
  @description('Deployment name the handler calls.')
  name: string
  @description('Model name, e.g. gpt-4.1.')
  model: string
  @description('Model version, e.g. 2025-04-14.')
  version: string
  @description('Deployment type, each its own quota pool: GlobalStandard (any region, the most capacity), DataZoneStandard (processing kept in the data zone), Standard (this region only; few regions offer the gpt-4.1 family).')
  sku: 'GlobalStandard' | 'DataZoneStandard' | 'Standard'
  @description('Capacity: 1 unit = 1,000 tokens per minute.')
  @minValue(1)
  capacity: int
  @description('Requests per minute per unit of capacity: 1 for the gpt-4.1 family, 6 for gpt-4o and gpt-4o-mini (Azure\'s quota tables; docs/deploy.md).')
  @minValue(1)
  rpmPerUnit: int
  @description('USD per million input tokens, a decimal string such as 2.00 (for the cost figures).')
  priceInputPer1M: string
  @description('USD per million output tokens, a decimal string such as 8.00.')
  priceOutputPer1M: string
}

@export()
@description('The deployments of both tiers; the function app reads its settings from the same object.')
type tierDeployments = {
  premium: modelDeployment
  standard: modelDeployment
}

resource account 'Microsoft.CognitiveServices/accounts@2025-06-01' = {
  name: name
  location: location
  tags: tags
  kind: 'OpenAI'
  sku: {
    name: 'S0'
  }
  properties: {
    customSubDomainName: name
    disableLocalAuth: disableLocalAuth
    publicNetworkAccess: publicNetworkAccess
    networkAcls: {
      defaultAction: publicNetworkAccess == 'Enabled' ? 'Allow' : 'Deny'
    }
  }
}

// Deployments in one account must be created one at a time, hence batchSize(1).
@batchSize(1)
resource modelDeploymentResources 'Microsoft.CognitiveServices/accounts/deployments@2025-06-01' = [
  for deployment in items(deployments): {
    parent: account
    name: deployment.value.name
    sku: {
      name: deployment.value.sku
      capacity: deployment.value.capacity
    }
    properties: {
      model: {
        format: 'OpenAI'
        name: deployment.value.model
        version: deployment.value.version
      }
      versionUpgradeOption: 'OnceCurrentVersionExpired'
    }
  }
]

output name string = account.name
output id string = account.id
output endpoint string = account.properties.endpoint
