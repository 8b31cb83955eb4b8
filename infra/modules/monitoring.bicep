// Log Analytics workspace and workspace-based Application Insights for the function app. With local
// authentication off, only Entra ID identities with Monitoring Metrics Publisher can send telemetry.

@description('Azure region for the monitoring resources.')
param location string

@description('Tags applied to every resource.')
param tags object

@description('Log Analytics workspace name.')
param workspaceName string

@description('Application Insights component name.')
param appInsightsName string

@description('Accept telemetry only from Entra ID identities (the app identity holds Monitoring Metrics Publisher).')
param disableLocalAuth bool

@description('Days of log retention in the workspace.')
@minValue(30)
@maxValue(730)
param retentionInDays int

resource workspace 'Microsoft.OperationalInsights/workspaces@2023-09-01' = {
  name: workspaceName
  location: location
  tags: tags
  properties: {
    sku: {
      name: 'PerGB2018'
    }
    retentionInDays: retentionInDays
  }
}

resource appInsights 'Microsoft.Insights/components@2020-02-02' = {
  name: appInsightsName
  location: location
  tags: tags
  kind: 'web'
  properties: {
    Application_Type: 'web'
    WorkspaceResourceId: workspace.id
    DisableLocalAuth: disableLocalAuth
  }
}

output appInsightsName string = appInsights.name
output appInsightsConnectionString string = appInsights.properties.ConnectionString
output workspaceId string = workspace.id
